//! The declarative command table (architecture principle 3): per-command
//! facts, and the one place that routes a command to its handler file.

use braid_smb_proto::header::Command;

use super::ops;
use super::{OpResult, Request};

pub struct OpInfo {
    pub command: Command,
    /// Metric and log name.
    pub name: &'static str,
    /// MS-SMB2 3.3.5.2.9: needs a valid session.
    pub needs_session: bool,
    /// MS-SMB2 3.3.5.2.11: needs a tree connect.
    pub needs_tree: bool,
}

const fn op(command: Command, name: &'static str, needs_session: bool, needs_tree: bool) -> OpInfo {
    OpInfo {
        command,
        name,
        needs_session,
        needs_tree,
    }
}

pub static OPS: [OpInfo; Command::COUNT] = [
    op(Command::Negotiate, "negotiate", false, false),
    op(Command::SessionSetup, "session_setup", false, false),
    op(Command::Logoff, "logoff", true, false),
    op(Command::TreeConnect, "tree_connect", true, false),
    op(Command::TreeDisconnect, "tree_disconnect", true, true),
    op(Command::Create, "create", true, true),
    op(Command::Close, "close", true, true),
    op(Command::Flush, "flush", true, true),
    op(Command::Read, "read", true, true),
    op(Command::Write, "write", true, true),
    op(Command::Lock, "lock", true, true),
    op(Command::Ioctl, "ioctl", true, true),
    op(Command::Cancel, "cancel", false, false),
    op(Command::Echo, "echo", false, false),
    op(Command::QueryDirectory, "query_directory", true, true),
    op(Command::ChangeNotify, "change_notify", true, true),
    op(Command::QueryInfo, "query_info", true, true),
    op(Command::SetInfo, "set_info", true, true),
    op(Command::OplockBreak, "oplock_break", true, true),
];

pub fn info(command: Command) -> &'static OpInfo {
    &OPS[command as usize]
}

pub async fn dispatch(command: Command, req: &mut Request<'_>) -> OpResult {
    match command {
        Command::Negotiate => ops::negotiate::handle(req).await,
        Command::SessionSetup => ops::session_setup::handle(req).await,
        Command::Logoff => ops::logoff::handle(req).await,
        Command::TreeConnect => ops::tree_connect::handle(req).await,
        Command::TreeDisconnect => ops::tree_disconnect::handle(req).await,
        Command::Create => ops::create::handle(req).await,
        Command::Close => ops::close::handle(req).await,
        Command::Flush => ops::flush::handle(req).await,
        Command::Read => ops::read::handle(req).await,
        Command::Write => ops::write::handle(req).await,
        Command::Lock => ops::lock::handle(req).await,
        Command::Ioctl => ops::ioctl::handle(req).await,
        // CANCEL is handled on the reader and never reaches here.
        Command::Cancel => Err(braid_smb_proto::NtStatus::INVALID_PARAMETER),
        Command::Echo => ops::echo::handle(req).await,
        Command::QueryDirectory => ops::query_directory::handle(req).await,
        Command::ChangeNotify => ops::change_notify::handle(req).await,
        Command::QueryInfo => ops::query_info::handle(req).await,
        Command::SetInfo => ops::set_info::handle(req).await,
        Command::OplockBreak => ops::oplock_break::handle(req).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn table_is_indexed_by_command() {
        for (i, o) in OPS.iter().enumerate() {
            assert_eq!(o.command as usize, i, "{}", o.name);
        }
    }
}
