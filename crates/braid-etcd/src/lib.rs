//! Braid's state store in etcd (braid-fs `state_store.rs`): what must
//! outlive the process and the node — SMB persistent and durable opens, NFS
//! client records — kept where every node of a cluster reads it.
//!
//! A record `space`/`key` is the etcd key `<prefix>/<space>/<key>` (prefix
//! `/braid` by default), its value the record sealed with braid-fs's `seal`
//! (length and SHA-256), so that a value altered in etcd is reported by
//! `load` with its key instead of being read.
//!
//! - `put` is one `Txn` (etcd API `KV.Txn`, "Transactions" in etcd's
//!   api_guarantees/learning docs): if the key's `mod_revision` is the one
//!   this process last wrote or loaded (0: absent, for a record it has not
//!   seen), put; else the record is left alone and the put fails with
//!   `StoreError::Conflict`. Another node that took a record over is
//!   never silently overwritten.
//! - `delete` is one request: conditional in the same way when this
//!   process knows the record's revision, plain `DeleteRange` otherwise. A
//!   record already gone is not an error.
//! - `load` is one `Range` over `<prefix>/<space>/` (linearizable, one
//!   revision): the records, the corrupt ones by key, and the revisions
//!   later writes are checked against.
//!
//! Every request has a deadline (3 s by default, also sent to etcd as
//! gRPC's `grpc-timeout`): an unreachable etcd fails a call with
//! `StoreError::Unavailable` within it, so a new persistent open is
//! refused (`smb/persistent.rs`) while I/O on existing opens goes on.
//!
//! The trait is synchronous and called from blocking threads (and now and
//! then from an async task). The store owns a one-thread tokio runtime that
//! runs the gRPC client; a caller hands it the request and waits on a std
//! channel. It never enters, and so can never deadlock, the caller's runtime.

pub mod proto;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use braid_fs::state_store::{
    check_key, seal, unseal, CorruptRecord, Loaded, StateStore, StoreError,
};
use tonic::transport::{Channel, Endpoint};

use proto::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use proto::etcdserverpb::kv_client::KvClient;
use proto::etcdserverpb::request_op::Request as Op;
use proto::etcdserverpb::response_op::Response as OpResponse;
use proto::etcdserverpb::{
    Compare, DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest, TxnResponse,
};

/// The key prefix when none is configured.
pub const DEFAULT_PREFIX: &str = "/braid";

/// A request's deadline when none is given: long enough for an fsync on a
/// loaded etcd, short enough that a client's CREATE is answered (with
/// INSUFFICIENT_RESOURCES) well before it gives up on the server.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);

/// The largest `load` answer accepted (tonic's default is 4 MiB): some
/// 60,000 open records of ~1 KiB. etcd answers a range in one message.
const MAX_RESPONSE: usize = 64 << 20;

/// One `etcd_endpoints` entry as a URL: `http://host:port`, or `host:port`
/// (taken as http, as etcdctl does). TLS to etcd is not supported yet.
pub fn endpoint_url(s: &str) -> Result<String, String> {
    let s = s.trim();
    let url = if s.contains("://") {
        s.to_string()
    } else {
        format!("http://{s}")
    };
    if url.starts_with("https://") {
        return Err(format!(
            "'{s}': TLS to etcd is not supported yet; use an http:// endpoint on a trusted network"
        ));
    }
    let ok = url
        .strip_prefix("http://")
        .is_some_and(|rest| !rest.is_empty() && !rest.contains('/'))
        && Endpoint::from_shared(url.clone()).is_ok();
    if ok {
        Ok(url)
    } else {
        Err(format!(
            "'{s}' is not an etcd client URL such as http://127.0.0.1:2379"
        ))
    }
}

/// `etcd_prefix`: starts with `/`, does not end with one, printable ASCII.
pub fn check_prefix(p: &str) -> Result<(), String> {
    let ok = p.len() > 1
        && p.starts_with('/')
        && !p.ends_with('/')
        && !p.contains("//")
        && p.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "'{p}' is not a key prefix such as /braid (a leading '/', no trailing one, no spaces)"
        ))
    }
}

/// The end of the range of every key that starts with `prefix` (etcd's
/// RangeRequest: "range_end is the key plus one", the last byte below 0xff
/// incremented).
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // All 0xff: to the end of the key space ("\0").
    vec![0]
}

/// What this process knows of one key.
#[derive(Default)]
struct Slot {
    /// The key's mod_revision as this process last wrote or loaded it;
    /// None: absent, or never seen.
    revision: Option<i64>,
    /// Writes whose outcome is unknown since the last known revision (a
    /// deadline passed, a connection broke): the sealed value of a put, or
    /// None for a delete. When a later write's revision check fails and
    /// etcd holds exactly one of these outcomes, it was ours: its revision
    /// is adopted and the write tried once more.
    uncertain: Vec<Option<Vec<u8>>>,
    /// Dropped from the map by a delete while a caller waited for it: that
    /// caller looks the key up again.
    detached: bool,
}

type SlotRef = Arc<Mutex<Slot>>;

pub struct EtcdStore {
    endpoints: Vec<String>,
    prefix: String,
    timeout: Duration,
    kv: KvClient<Channel>,
    handle: tokio::runtime::Handle,
    /// Some until drop, which shuts it down without waiting: the store may
    /// be dropped on an async thread, where a blocking shutdown panics.
    runtime: Option<tokio::runtime::Runtime>,
    /// Writes hold it shared, `load` exclusively: the revisions a load
    /// reads are not overtaken by this process's own writes in flight.
    gate: RwLock<()>,
    /// Full key → what this process knows of it. Writes to one key are
    /// serialized on its slot, so two updates of one record from this
    /// process never fail each other's revision check.
    known: Mutex<HashMap<String, SlotRef>>,
}

impl EtcdStore {
    /// A store on `endpoints` (see [`endpoint_url`]) under `prefix` (see
    /// [`check_prefix`]). Nothing is sent yet: the connection is made by
    /// the first request, so an unreachable etcd does not stop a start.
    pub fn new(endpoints: &[String], prefix: &str) -> Result<EtcdStore, String> {
        EtcdStore::with_timeout(endpoints, prefix, DEFAULT_TIMEOUT)
    }

    pub fn with_timeout(
        endpoints: &[String],
        prefix: &str,
        timeout: Duration,
    ) -> Result<EtcdStore, String> {
        if endpoints.is_empty() {
            return Err(
                "etcd_endpoints: give at least one, e.g. [\"http://127.0.0.1:2379\"]".into(),
            );
        }
        check_prefix(prefix).map_err(|e| format!("etcd_prefix = {e}"))?;
        let urls = endpoints
            .iter()
            .map(|e| endpoint_url(e).map_err(|e| format!("etcd_endpoints: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("braid-etcd")
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| format!("state store: cannot start the etcd client's runtime: {e}"))?;
        let mut list = Vec::with_capacity(urls.len());
        for url in &urls {
            let ep = Endpoint::from_shared(url.clone())
                .map_err(|e| format!("etcd_endpoints: '{url}': {e}"))?
                .connect_timeout(timeout)
                .tcp_nodelay(true)
                // A connection to a node that vanished without a reset is
                // found dead within seconds, not at the next TCP timeout.
                .http2_keep_alive_interval(Duration::from_secs(10))
                .keep_alive_timeout(Duration::from_secs(5))
                .keep_alive_while_idle(true);
            list.push(ep);
        }
        // The channel's workers are spawned on the store's runtime.
        let channel = {
            let _entered = runtime.enter();
            if list.len() == 1 {
                list.pop().expect("one endpoint").connect_lazy()
            } else {
                // Requests go to endpoints that are up; one that is down
                // is retried in the background.
                Channel::balance_list(list.into_iter())
            }
        };
        let kv = KvClient::new(channel).max_decoding_message_size(MAX_RESPONSE);
        Ok(EtcdStore {
            endpoints: urls,
            prefix: prefix.to_string(),
            timeout,
            kv,
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
            gate: RwLock::new(()),
            known: Mutex::new(HashMap::new()),
        })
    }

    /// The etcd key of `space`/`key`.
    pub fn key_of(&self, space: &str, key: &str) -> String {
        format!("{}/{space}/{key}", self.prefix)
    }

    fn space_prefix(&self, space: &str) -> String {
        format!("{}/{space}/", self.prefix)
    }

    fn endpoints_text(&self) -> String {
        self.endpoints.join(",")
    }

    /// Run one request on the store's runtime and wait for it, at most
    /// the deadline.
    fn call<T, F, Fut>(&self, what: &str, request: F) -> Result<T, Failure>
    where
        F: FnOnce(KvClient<Channel>, Duration) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>> + Send + 'static,
        T: Send + 'static,
    {
        let timeout = self.timeout;
        let fut = request(self.kv.clone(), timeout);
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.handle.spawn(async move {
            let _ = tx.send(tokio::time::timeout(timeout, fut).await);
        });
        let unavailable = |why: String| {
            Failure::Unavailable(format!(
                "etcd {} did not answer {what}: {why}",
                self.endpoints_text()
            ))
        };
        match rx.recv() {
            Ok(Ok(Ok(response))) => Ok(response.into_inner()),
            Ok(Ok(Err(status))) => Err(match status.code() {
                // Not sent, or sent and not known to be applied.
                tonic::Code::Unavailable
                | tonic::Code::DeadlineExceeded
                | tonic::Code::Cancelled
                | tonic::Code::Unknown
                | tonic::Code::Aborted => unavailable(if status.message() == "Timeout expired" {
                    // tonic's own deadline (grpc-timeout).
                    format!("no answer within {timeout:?}")
                } else {
                    status_text(&status)
                }),
                _ => Failure::Refused(format!(
                    "etcd {} refused {what}: {}",
                    self.endpoints_text(),
                    status_text(&status)
                )),
            }),
            Ok(Err(_elapsed)) => Err(unavailable(format!("no answer within {timeout:?}"))),
            Err(_) => Err(unavailable("the etcd client's runtime has stopped".into())),
        }
    }

    fn txn(&self, what: &str, req: TxnRequest) -> Result<TxnResponse, Failure> {
        self.call(what, move |mut kv, timeout| async move {
            let mut req = tonic::Request::new(req);
            req.set_timeout(timeout);
            kv.txn(req).await
        })
    }

    /// Run `f` on the slot of `full`, locked: one write at a time per key
    /// from this process. A slot detached while this caller waited for it
    /// is looked up again.
    fn with_slot<R>(&self, full: &str, f: impl FnOnce(&SlotRef, &mut Slot) -> R) -> R {
        loop {
            let slot = self.slot(full);
            let mut st = slot.lock().unwrap_or_else(|p| p.into_inner());
            if st.detached {
                continue;
            }
            return f(&slot, &mut st);
        }
    }

    /// Forget `full` once it is gone from etcd (so the map holds only
    /// records that exist).
    fn detach(&self, full: &str, slot: &SlotRef, st: &mut Slot) {
        st.detached = true;
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        if known.get(full).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            known.remove(full);
        }
    }

    fn slot(&self, full: &str) -> SlotRef {
        self.known
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(full.to_string())
            .or_default()
            .clone()
    }

    fn conflict(&self, full: &str, expected: Option<i64>, now: Option<i64>) -> StoreError {
        let was = match expected {
            Some(r) => format!("revision {r}"),
            None => "absent".into(),
        };
        let is = match now {
            Some(r) => format!("revision {r}"),
            None => "absent".into(),
        };
        StoreError::Conflict(format!(
            "etcd key {full} changed by another writer (this process expected it {was}, it is {is}); \
             left as it is"
        ))
    }
}

/// A failed request: not known to be applied, or refused by etcd.
enum Failure {
    Unavailable(String),
    Refused(String),
}

impl Failure {
    fn into_error(self, full: &str) -> StoreError {
        match self {
            Failure::Unavailable(m) => StoreError::Unavailable(m),
            Failure::Refused(m) => StoreError::Io(full.to_string(), std::io::Error::other(m)),
        }
    }
}

/// A status and its root cause, which tonic keeps behind layers of
/// "transport error" ("tcp connect error: Connection refused").
fn status_text(status: &tonic::Status) -> String {
    let mut root = None;
    let mut source = std::error::Error::source(status);
    while let Some(e) = source {
        root = Some(e.to_string());
        source = e.source();
    }
    match root {
        Some(root) if root != status.message() => format!("{}: {root}", status.message()),
        _ => status.message().to_string(),
    }
}

/// The key's current (mod_revision, value) from a Txn's failure branch
/// (a Range of the key); None: absent.
fn current_of(resp: &TxnResponse) -> Option<(i64, Vec<u8>)> {
    resp.responses.iter().find_map(|r| match &r.response {
        Some(OpResponse::ResponseRange(range)) => range
            .kvs
            .first()
            .map(|kv| (kv.mod_revision, kv.value.clone())),
        _ => None,
    })
}

fn revision_is(full: &[u8], expected: Option<i64>) -> Compare {
    Compare {
        result: CompareResult::Equal as i32,
        target: CompareTarget::Mod as i32,
        key: full.to_vec(),
        range_end: Vec::new(),
        // etcd compares an absent key as revision 0.
        target_union: Some(TargetUnion::ModRevision(expected.unwrap_or(0))),
    }
}

fn read_of(full: &[u8]) -> RequestOp {
    RequestOp {
        request: Some(Op::RequestRange(RangeRequest {
            key: full.to_vec(),
            ..Default::default()
        })),
    }
}

/// At most this many unknown outcomes are remembered per key.
const UNCERTAIN_KEPT: usize = 8;

fn remember_uncertain(st: &mut Slot, outcome: Option<Vec<u8>>) {
    if st.uncertain.len() == UNCERTAIN_KEPT {
        st.uncertain.remove(0);
    }
    st.uncertain.push(outcome);
}

/// Whether etcd's `current` state of a key is one of this process's
/// writes whose answer was lost.
fn was_ours(st: &Slot, current: &Option<(i64, Vec<u8>)>) -> bool {
    st.uncertain.iter().any(|o| match (o, current) {
        (Some(ours), Some((_, value))) => ours == value,
        (None, None) => true,
        _ => false,
    })
}

impl StateStore for EtcdStore {
    fn put(&self, space: &str, key: &str, value: &[u8]) -> Result<(), StoreError> {
        check_key(space)?;
        check_key(key)?;
        let full = self.key_of(space, key);
        let sealed = seal(value);
        let _gate = self.gate.read().unwrap_or_else(|p| p.into_inner());
        self.with_slot(&full, |_, st| {
            let mut retried = false;
            loop {
                let expected = st.revision;
                let req = TxnRequest {
                    compare: vec![revision_is(full.as_bytes(), expected)],
                    success: vec![RequestOp {
                        request: Some(Op::RequestPut(PutRequest {
                            key: full.clone().into_bytes(),
                            value: sealed.clone(),
                            ..Default::default()
                        })),
                    }],
                    failure: vec![read_of(full.as_bytes())],
                };
                match self.txn(&format!("a put of {full}"), req) {
                    Ok(resp) if resp.succeeded => {
                        // The Txn's revision is the put's: the key's
                        // mod_revision now.
                        let Some(header) = resp.header else {
                            return Err(Failure::Refused("etcd answered without a header".into())
                                .into_error(&full));
                        };
                        st.revision = Some(header.revision);
                        st.uncertain.clear();
                        return Ok(());
                    }
                    Ok(resp) => {
                        let current = current_of(&resp);
                        if !retried && was_ours(st, &current) {
                            st.revision = current.map(|(r, _)| r);
                            st.uncertain.clear();
                            retried = true;
                            continue;
                        }
                        return Err(self.conflict(&full, expected, current.map(|(r, _)| r)));
                    }
                    Err(f) => {
                        if matches!(f, Failure::Unavailable(_)) {
                            remember_uncertain(st, Some(sealed.clone()));
                        }
                        return Err(f.into_error(&full));
                    }
                }
            }
        })
    }

    fn delete(&self, space: &str, key: &str) -> Result<(), StoreError> {
        check_key(space)?;
        check_key(key)?;
        let full = self.key_of(space, key);
        let _gate = self.gate.read().unwrap_or_else(|p| p.into_inner());
        self.with_slot(&full, |slot, st| {
            let mut retried = false;
            loop {
                let expected = st.revision;
                let req = TxnRequest {
                    // A record this process has not seen is deleted
                    // whatever it holds: asked for by name, with nothing
                    // to check it against.
                    compare: expected
                        .map(|r| revision_is(full.as_bytes(), Some(r)))
                        .into_iter()
                        .collect(),
                    success: vec![RequestOp {
                        request: Some(Op::RequestDeleteRange(DeleteRangeRequest {
                            key: full.clone().into_bytes(),
                            ..Default::default()
                        })),
                    }],
                    failure: vec![read_of(full.as_bytes())],
                };
                match self.txn(&format!("a delete of {full}"), req) {
                    Ok(resp) if resp.succeeded => {
                        self.detach(&full, slot, st);
                        return Ok(());
                    }
                    Ok(resp) => {
                        let current = current_of(&resp);
                        if current.is_none() {
                            // Gone already: what was asked.
                            self.detach(&full, slot, st);
                            return Ok(());
                        }
                        if !retried && was_ours(st, &current) {
                            st.revision = current.map(|(r, _)| r);
                            st.uncertain.clear();
                            retried = true;
                            continue;
                        }
                        return Err(self.conflict(&full, expected, current.map(|(r, _)| r)));
                    }
                    Err(f) => {
                        if matches!(f, Failure::Unavailable(_)) {
                            remember_uncertain(st, None);
                        }
                        return Err(f.into_error(&full));
                    }
                }
            }
        })
    }

    fn load(&self, space: &str) -> Result<Loaded, StoreError> {
        check_key(space)?;
        let prefix = self.space_prefix(space);
        let _gate = self.gate.write().unwrap_or_else(|p| p.into_inner());
        let req = RangeRequest {
            key: prefix.clone().into_bytes(),
            range_end: prefix_end(prefix.as_bytes()),
            // Linearizable (serializable = false, the default): a load
            // sees every write acknowledged before it.
            ..Default::default()
        };
        let resp = self
            .call(
                &format!("a load of {prefix}"),
                move |mut kv, timeout| async move {
                    let mut req = tonic::Request::new(req);
                    req.set_timeout(timeout);
                    kv.range(req).await
                },
            )
            .map_err(|f| f.into_error(&prefix))?;
        let mut out = Loaded::default();
        let mut revisions = Vec::with_capacity(resp.kvs.len());
        for kv in resp.kvs {
            let location = String::from_utf8_lossy(&kv.key).into_owned();
            let name = kv
                .key
                .get(prefix.len()..)
                .and_then(|n| std::str::from_utf8(n).ok())
                .filter(|n| check_key(n).is_ok());
            let Some(name) = name else {
                out.corrupt.push(CorruptRecord {
                    location,
                    reason: "not a record name".into(),
                });
                continue;
            };
            revisions.push((location.clone(), kv.mod_revision));
            match unseal(&kv.value) {
                Ok(payload) => out.records.push((name.to_string(), payload.to_vec())),
                Err(reason) => out.corrupt.push(CorruptRecord { location, reason }),
            }
        }
        // What this process knows of the space is now what etcd holds.
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        known.retain(|k, slot| {
            let mine = k.starts_with(&prefix);
            if mine {
                slot.lock().unwrap_or_else(|p| p.into_inner()).detached = true;
            }
            !mine
        });
        for (full, revision) in revisions {
            known.insert(
                full,
                Arc::new(Mutex::new(Slot {
                    revision: Some(revision),
                    ..Slot::default()
                })),
            );
        }
        out.records.sort();
        Ok(out)
    }

    fn describe(&self) -> String {
        format!("etcd {} prefix {}", self.endpoints_text(), self.prefix)
    }
}

impl Drop for EtcdStore {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_is_the_first_key_after_the_prefix() {
        assert_eq!(prefix_end(b"/braid/smb-opens/"), b"/braid/smb-opens0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff\xff"), b"\0");
    }

    #[test]
    fn endpoints_and_prefixes() {
        assert_eq!(endpoint_url(" h:1 ").unwrap(), "http://h:1");
        assert_eq!(
            endpoint_url("http://[::1]:2379").unwrap(),
            "http://[::1]:2379"
        );
        assert!(endpoint_url("https://h:1").unwrap_err().contains("TLS"));
        assert!(check_prefix("/braid/cluster-a").is_ok());
        assert!(check_prefix("/braid//x").is_err());
    }

    #[test]
    fn only_an_unknown_outcome_of_this_process_is_adopted() {
        let mut st = Slot::default();
        assert!(!was_ours(&st, &None));
        remember_uncertain(&mut st, Some(b"mine".to_vec()));
        assert!(was_ours(&st, &Some((7, b"mine".to_vec()))));
        assert!(!was_ours(&st, &Some((7, b"theirs".to_vec()))));
        assert!(!was_ours(&st, &None));
        remember_uncertain(&mut st, None);
        assert!(was_ours(&st, &None));
        for i in 0..UNCERTAIN_KEPT {
            remember_uncertain(&mut st, Some(vec![i as u8]));
        }
        assert_eq!(st.uncertain.len(), UNCERTAIN_KEPT);
        assert!(!was_ours(&st, &Some((7, b"mine".to_vec()))));
    }
}
