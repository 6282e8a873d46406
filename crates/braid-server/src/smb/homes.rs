//! Home shares, as Samba's `[homes]` section serves them: a share named
//! `homes` whose path holds `%U` is no share itself but a template. A user
//! who connects to a share named after them (or to `homes`) gets the
//! template's share with `%U` replaced by their name in lower case, its
//! directory created (mode 0700) when missing, so that each user of a
//! company file server has a private place without a share per user in
//! the config. Other users, and guests, find no such share.

use std::collections::HashMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use braid_fs::FileService;

use crate::config::ShareConfig;
use crate::state::Share;

/// What stands for the user's name in the template's path.
pub const USER: &str = "%U";

/// Whether `s` is a home share template rather than a share.
pub fn is_template(s: &ShareConfig) -> bool {
    s.name.eq_ignore_ascii_case("homes") && s.path.to_string_lossy().contains(USER)
}

pub struct HomeShares {
    template: ShareConfig,
    /// Served so far, by lower-cased user name.
    served: Mutex<HashMap<String, Arc<Share>>>,
}

impl HomeShares {
    pub fn new(template: ShareConfig) -> Result<HomeShares, String> {
        if !is_template(&template) {
            return Err(format!(
                "share 'homes': path {} must hold {USER}, e.g. \"/srv/homes/{USER}\"",
                template.path.display()
            ));
        }
        Ok(HomeShares {
            template,
            served: Mutex::new(HashMap::new()),
        })
    }

    /// The home shares served so far: a reload that changes the template
    /// ends them (`reload.rs`).
    pub fn served_shares(&self) -> Vec<Arc<Share>> {
        let served = self.served.lock().unwrap_or_else(|p| p.into_inner());
        served.values().cloned().collect()
    }

    /// Whether the home shares are listed (the template's `browseable`).
    pub fn browseable(&self) -> bool {
        self.template.browseable
    }

    /// The comment a user's home share shows.
    pub fn comment(&self, user: &str) -> String {
        if self.template.comment.is_empty() {
            format!("Home directory of {user}")
        } else {
            self.template.comment.clone()
        }
    }

    /// `user`'s home share, served on first use.
    pub fn share_of(&self, files: &FileService, user: &str) -> Result<Arc<Share>, String> {
        let key = user.to_lowercase();
        let mut served = self.served.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = served.get(&key) {
            return Ok(s.clone());
        }
        let path = home_path(&self.template.path, &key)?;
        if !path.is_dir() {
            // Only the user's own directory is made; what holds it must exist.
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&path)
                .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        }
        let config = ShareConfig {
            name: user.to_string(),
            path,
            comment: self.comment(user),
            ..self.template.clone()
        };
        let share = Arc::new(Share::serve(files, &config)?);
        served.insert(key, share.clone());
        Ok(share)
    }
}

/// The template's path with `%U` replaced by `user`, which must be one
/// plain path component: a user name that could climb out of the home
/// directory or name another (`..`, `a/b`) gets no home share.
fn home_path(template: &std::path::Path, user: &str) -> Result<PathBuf, String> {
    let plain =
        !user.is_empty() && user != "." && user != ".." && !user.contains(['/', '\\', '\0', '%']);
    if !plain {
        return Err(format!("user name {user:?} cannot name a directory"));
    }
    Ok(PathBuf::from(
        template.to_string_lossy().replace(USER, user),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_name_is_one_plain_component() {
        let t = std::path::Path::new("/srv/homes/%U/files");
        assert_eq!(
            home_path(t, "alice").unwrap(),
            PathBuf::from("/srv/homes/alice/files")
        );
        for bad in ["", ".", "..", "../etc", "a/b", "a\\b", "%U", "a\0"] {
            assert!(home_path(t, bad).is_err(), "{bad:?}");
        }
    }
}
