//! `braid vfs`: work on a share's files from the server's own host, as
//! Samba's `net vfs` does.

use std::path::PathBuf;
use std::sync::Arc;

use braid_fs::{FileService, SystemClock};

use crate::config;

#[derive(clap::Subcommand)]
pub enum VfsCmd {
    /// Put each file's named streams (the Finder info of AFP_AfpInfo, the
    /// other streams, the AFP_Resource fork) into an AppleDouble `._NAME`
    /// file next to it, laid out as Samba's `net vfs stream2adouble`
    /// writes it, and remove them: for moving a share to a server or file
    /// system that keeps macOS metadata in such files.
    Stream2adouble(Stream2AdoubleArgs),
}

#[derive(clap::Args)]
pub struct Stream2AdoubleArgs {
    /// TOML config file that defines the share (see docs/CONFIG.md).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Or the share itself: NAME=PATH (repeatable).
    #[arg(long)]
    share: Vec<String>,
    /// Convert every file below PATH, which is a directory.
    #[arg(long)]
    recursive: bool,
    /// The share's name.
    share_name: String,
    /// The file or directory, relative to the share's root (`/` or `\`).
    path: String,
}

pub fn run(cmd: VfsCmd) -> Result<(), String> {
    match cmd {
        VfsCmd::Stream2adouble(a) => stream2adouble(a),
    }
}

fn stream2adouble(a: Stream2AdoubleArgs) -> Result<(), String> {
    let mut entries = match &a.config {
        Some(p) => config::load(p)?.shares,
        None => Vec::new(),
    };
    for s in &a.share {
        entries.push(config::parse_share_flag(s)?);
    }
    let entry = entries
        .iter()
        .find(|s| s.name.eq_ignore_ascii_case(&a.share_name))
        .ok_or_else(|| {
            format!(
                "no share '{}': give the config that defines it (--config FILE) or --share NAME=PATH",
                a.share_name
            )
        })?;
    let (served, is_homes) = crate::served_share(entry)?;
    if is_homes {
        return Err(format!(
            "share '{}' is each user's own: give the user's directory as --share NAME=PATH",
            entry.name
        ));
    }
    let files = FileService::new(Arc::new(SystemClock));
    let share = braid_server::state::Share::serve(&files, &served)?;
    let done = share
        .fs
        .streams_to_appledouble(&a.path, a.recursive)
        .map_err(|e| match e {
            braid_fs::FsError::IsADirectory => {
                format!("{}: a directory: add --recursive", a.path)
            }
            e => format!("{}: {e}", a.path),
        })?;
    for p in &done.converted {
        println!("converted {p}");
    }
    for (p, e) in &done.failed {
        eprintln!("braid: {p}: not converted: {e}");
    }
    println!(
        "braid: {} file(s) looked at, {} converted, {} failed",
        done.files,
        done.converted.len(),
        done.failed.len()
    );
    if done.failed.is_empty() {
        Ok(())
    } else {
        Err(format!("{} file(s) not converted", done.failed.len()))
    }
}
