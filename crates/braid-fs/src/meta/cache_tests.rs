//! The cache layer over the in-memory backend, with a manual clock.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::clock::ManualClock;
use crate::meta::memory::{MemoryStore, ROOT};
use crate::meta::{CacheBudget, MetadataCache, MetadataStore};

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
    ))
}

fn cache(store: MemoryStore, clock: &Arc<ManualClock>) -> MetadataCache<MemoryStore> {
    MetadataCache::new(store, clock.clone(), Arc::new(CacheBudget::default()))
}

#[test]
fn negative_lookups_in_an_indexed_directory_do_not_scan() {
    let c = clock();
    let store = MemoryStore::new(c.clone());
    for i in 0..1000 {
        store.create(ROOT, &format!("File{i}.txt")).unwrap();
    }
    let cache = cache(store, &c);
    assert_eq!(
        cache.lookup(ROOT, "file7.TXT").unwrap().as_deref(),
        Some("File7.txt")
    );
    assert_eq!(
        cache.backend().scans(),
        1,
        "the first lookup reads the directory"
    );
    for i in 0..500 {
        assert_eq!(cache.lookup(ROOT, &format!("new{i}")).unwrap(), None);
    }
    assert_eq!(
        cache.lookup(ROOT, "FILE999.txt").unwrap().as_deref(),
        Some("File999.txt")
    );
    assert_eq!(
        cache.backend().scans(),
        1,
        "no lookup after the first scans"
    );
    let s = cache.cache_stats().unwrap();
    assert_eq!((s.misses, s.hits, s.negative_hits), (1, 1, 500));
    assert_eq!(s.entries, 1000);
    assert!(s.bytes >= 1000 * 8);
}

#[test]
fn changes_behind_the_cache_are_seen_at_once() {
    let c = clock();
    let cache = cache(MemoryStore::new(c.clone()), &c);
    let store = cache.backend();
    store.create(ROOT, "Old.txt").unwrap();
    assert_eq!(
        cache.lookup(ROOT, "old.TXT").unwrap().as_deref(),
        Some("Old.txt")
    );
    // Created, renamed (a case-only rename too) and deleted by "another
    // process" in the same clock tick as the read.
    store.create(ROOT, "Report.DOC").unwrap();
    assert_eq!(
        cache.lookup(ROOT, "report.doc").unwrap().as_deref(),
        Some("Report.DOC")
    );
    store
        .rename(ROOT, "Report.DOC", ROOT, "REPORT.doc")
        .unwrap();
    assert_eq!(
        cache.lookup(ROOT, "report.doc").unwrap().as_deref(),
        Some("REPORT.doc")
    );
    store.remove(ROOT, "REPORT.doc").unwrap();
    assert_eq!(cache.lookup(ROOT, "report.doc").unwrap(), None);
    store.rename(ROOT, "Old.txt", ROOT, "New.txt").unwrap();
    assert_eq!(cache.lookup(ROOT, "old.txt").unwrap(), None);
    assert_eq!(
        cache.lookup(ROOT, "NEW.TXT").unwrap().as_deref(),
        Some("New.txt")
    );
    assert_eq!(
        cache.backend().scans(),
        1,
        "changes were applied, not rescanned"
    );
    assert!(cache.cache_stats().unwrap().invalidations >= 5);
    assert_eq!(cache.cache_stats().unwrap().entries, 1);
}

#[test]
fn a_directory_moved_keeps_its_index_and_its_parents_follow() {
    let c = clock();
    let cache = cache(MemoryStore::new(c.clone()), &c);
    let store = cache.backend();
    let a = store.mkdir(ROOT, "A").unwrap();
    let b = store.mkdir(ROOT, "B").unwrap();
    store.create(a, "Inner").unwrap();
    assert_eq!(cache.lookup(a, "inner").unwrap().as_deref(), Some("Inner"));
    assert_eq!(cache.lookup(ROOT, "a").unwrap().as_deref(), Some("A"));
    assert_eq!(cache.lookup(b, "a").unwrap(), None);
    store.rename(ROOT, "A", b, "Moved").unwrap();
    assert_eq!(cache.lookup(ROOT, "a").unwrap(), None);
    assert_eq!(cache.lookup(b, "MOVED").unwrap().as_deref(), Some("Moved"));
    assert_eq!(cache.lookup(a, "INNER").unwrap().as_deref(), Some("Inner"));
}

#[test]
fn the_broken_layer_serves_stale_answers() {
    // What the coherence tests must catch: a layer that skips invalidation.
    let c = clock();
    let cache = cache(MemoryStore::new(c.clone()), &c).skipping_invalidation();
    let store = cache.backend();
    assert_eq!(cache.lookup(ROOT, "x").unwrap(), None);
    store.create(ROOT, "X").unwrap();
    assert_eq!(cache.lookup(ROOT, "x").unwrap(), None, "stale by design");
}

#[test]
fn without_a_feed_a_recent_stamp_is_not_trusted() {
    let c = clock();
    let cache = cache(MemoryStore::new(c.clone()).without_feed(), &c);
    let store = cache.backend();
    store.create(ROOT, "a").unwrap();
    // Read within the racy margin of the last change: not trusted, so a
    // change in the same clock tick (same stamp) is still seen.
    assert_eq!(cache.lookup(ROOT, "B").unwrap(), None);
    store.create(ROOT, "b").unwrap();
    assert_eq!(cache.lookup(ROOT, "B").unwrap().as_deref(), Some("b"));
    assert_eq!(store.scans(), 2);
    // Once the stamp is older than the margin when read, the index holds.
    c.advance(Duration::from_secs(1));
    assert_eq!(cache.lookup(ROOT, "C").unwrap(), None);
    assert_eq!(store.scans(), 3);
    assert_eq!(cache.lookup(ROOT, "D").unwrap(), None);
    assert_eq!(cache.lookup(ROOT, "A").unwrap().as_deref(), Some("a"));
    assert_eq!(
        store.scans(),
        3,
        "a quiet directory is answered from the index"
    );
    // A later change moves the stamp: the index is read again.
    c.advance(Duration::from_secs(1));
    store.create(ROOT, "c").unwrap();
    assert_eq!(cache.lookup(ROOT, "C").unwrap().as_deref(), Some("c"));
    assert_eq!(store.scans(), 4);
    assert!(cache.cache_stats().unwrap().invalidations >= 2);
}

#[test]
fn an_overflow_drops_every_index() {
    let c = clock();
    let cache = cache(MemoryStore::new(c.clone()).with_queue_limit(4), &c);
    let store = cache.backend();
    assert_eq!(cache.lookup(ROOT, "x").unwrap(), None);
    for i in 0..10 {
        store.create(ROOT, &format!("f{i}")).unwrap();
    }
    assert_eq!(cache.lookup(ROOT, "F9").unwrap().as_deref(), Some("f9"));
    assert_eq!(store.scans(), 2, "lost changes: read again");
    assert_eq!(cache.cache_stats().unwrap().entries, 10);
}

#[test]
fn memory_is_bounded_least_recently_used_first() {
    let c = clock();
    let budget = Arc::new(CacheBudget::new(25, 1 << 20));
    let cache = MetadataCache::new(MemoryStore::new(c.clone()), c.clone(), budget.clone());
    let store = cache.backend();
    let dirs: Vec<u64> = (0..3)
        .map(|i| store.mkdir(ROOT, &format!("d{i}")).unwrap())
        .collect();
    for d in &dirs {
        for i in 0..10 {
            store.create(*d, &format!("n{i}")).unwrap();
        }
    }
    cache.lookup(dirs[0], "X").unwrap();
    cache.lookup(dirs[1], "X").unwrap();
    cache.lookup(dirs[0], "Y").unwrap();
    // A third directory does not fit: the least recently used (d1) goes.
    cache.lookup(dirs[2], "X").unwrap();
    assert_eq!(cache.cache_stats().unwrap().entries, 20);
    assert_eq!(budget.used().0, 20);
    let scans = store.scans();
    cache.lookup(dirs[0], "Z").unwrap();
    cache.lookup(dirs[2], "Z").unwrap();
    assert_eq!(store.scans(), scans, "d0 and d2 stayed");
    cache.lookup(dirs[1], "Z").unwrap();
    assert_eq!(store.scans(), scans + 1, "d1 was evicted");
    // A directory larger than the whole budget is answered but not kept.
    for i in 0..30 {
        store.create(ROOT, &format!("big{i}")).unwrap();
    }
    assert_eq!(
        cache.lookup(ROOT, "BIG29").unwrap().as_deref(),
        Some("big29")
    );
    assert!(budget.used().0 <= 25);
    drop(cache);
    assert_eq!(
        budget.used(),
        (0, 0),
        "a dropped cache gives its budget back"
    );
}

#[test]
fn short_names_are_found_through_the_index() {
    let c = clock();
    let cache = cache(MemoryStore::new(c.clone()), &c);
    let store = cache.backend();
    store.create(ROOT, "A long file name.text").unwrap();
    let short = crate::shortname::short_name("A long file name.text");
    assert!(short.contains('~'), "{short}");
    assert_eq!(
        cache
            .lookup(ROOT, &short.to_lowercase())
            .unwrap()
            .as_deref(),
        Some("A long file name.text")
    );
    assert_eq!(
        store.lookup_folded(ROOT, &short).unwrap().as_deref(),
        Some("A long file name.text"),
        "the backend agrees"
    );
}

/// One step of the model test: a change "on the host", the clock moving,
/// or a lookup through the cache.
#[derive(Debug, Clone)]
enum Step {
    Create(usize, usize),
    Remove(usize, usize),
    Rename(usize, usize, usize, usize),
    Advance(u64),
    Lookup(usize, usize),
}

const NAMES: [&str; 8] = ["a", "A", "b", "B", "ab", "Ab", "aB", "AB~1"];

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    let d = 0..3usize;
    let n = 0..NAMES.len();
    prop_oneof![
        (d.clone(), n.clone()).prop_map(|(d, n)| Step::Create(d, n)),
        (d.clone(), n.clone()).prop_map(|(d, n)| Step::Remove(d, n)),
        (d.clone(), n.clone(), d.clone(), n.clone())
            .prop_map(|(a, b, c, e)| Step::Rename(a, b, c, e)),
        (0..120u64).prop_map(Step::Advance),
        (d, n).prop_map(|(d, n)| Step::Lookup(d, n)),
    ]
}

/// Whatever happens beside it, each lookup through the cache agrees with
/// the store: the name it gives exists and folds to the one asked, and it
/// finds one exactly when the store has one. With a feed, without one,
/// and with a queue that overflows.
fn agrees_with_the_store(store: MemoryStore, clock: Arc<ManualClock>, steps: Vec<Step>) {
    check_against_the_store(cache(store, &clock), clock, steps)
}

fn check_against_the_store(
    cache: MetadataCache<MemoryStore>,
    clock: Arc<ManualClock>,
    steps: Vec<Step>,
) {
    let s = cache.backend();
    let dirs = [
        ROOT,
        s.mkdir(ROOT, "d1").unwrap(),
        s.mkdir(ROOT, "d2").unwrap(),
    ];
    for st in steps {
        match st {
            Step::Create(d, n) => {
                let _ = s.create(dirs[d], NAMES[n]);
            }
            Step::Remove(d, n) => {
                let _ = s.remove(dirs[d], NAMES[n]);
            }
            Step::Rename(a, b, c, e) => {
                if s.exists(dirs[c], NAMES[e]).unwrap() {
                    let _ = s.remove(dirs[c], NAMES[e]);
                }
                let _ = s.rename(dirs[a], NAMES[b], dirs[c], NAMES[e]);
            }
            Step::Advance(ms) => clock.advance(Duration::from_millis(ms)),
            Step::Lookup(d, n) => {
                let want = NAMES[n];
                let got = cache.lookup(dirs[d], want).unwrap();
                let truth = s.lookup(dirs[d], want).unwrap();
                assert_eq!(
                    got.is_some(),
                    truth.is_some(),
                    "{want} in {d}: {got:?} vs {truth:?}"
                );
                if let Some(g) = got {
                    assert!(s.exists(dirs[d], &g).unwrap(), "{g} does not exist");
                    let short = crate::shortname::short_name(&g);
                    assert!(
                        g.to_lowercase() == want.to_lowercase() || short.eq_ignore_ascii_case(want),
                        "{g} is not {want}"
                    );
                }
            }
        }
    }
    let stats = cache.cache_stats().unwrap();
    assert!(stats.entries <= 3 * NAMES.len() as u64 + 2, "{stats:?}");
}

#[test]
fn the_model_check_catches_the_broken_layer() {
    let c = clock();
    let broken = cache(MemoryStore::new(c.clone()), &c).skipping_invalidation();
    let steps = vec![Step::Lookup(0, 0), Step::Create(0, 1), Step::Lookup(0, 0)];
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        check_against_the_store(broken, c.clone(), steps.clone())
    }));
    assert!(caught.is_err(), "the broken layer passed the model check");
    agrees_with_the_store(MemoryStore::new(c.clone()), c, steps);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    #[test]
    fn cached_lookups_agree_with_the_store(steps in proptest::collection::vec(step(), 1..80)) {
        let c = clock();
        agrees_with_the_store(MemoryStore::new(c.clone()), c, steps);
    }

    #[test]
    fn cached_lookups_agree_without_a_feed(steps in proptest::collection::vec(step(), 1..80)) {
        let c = clock();
        agrees_with_the_store(MemoryStore::new(c.clone()).without_feed(), c, steps);
    }

    #[test]
    fn cached_lookups_agree_through_overflows(steps in proptest::collection::vec(step(), 1..80)) {
        let c = clock();
        agrees_with_the_store(MemoryStore::new(c.clone()).with_queue_limit(3), c, steps);
    }
}
