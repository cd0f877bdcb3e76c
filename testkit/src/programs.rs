//! Where the real servers' programs are found.

use std::path::PathBuf;

/// Where a program is: on `PATH`, else in `/usr/bin` or `/usr/local/bin`. Panics saying so when
/// it is nowhere.
pub(crate) fn binary(name: &str) -> PathBuf {
    find(name).unwrap_or_else(|| {
        panic!(
            "{name} not found on PATH: these tests need a real server \
                 (scripts/test installs it with apt-get)"
        )
    })
}

/// Where a program is: on `PATH`, else in `/usr/bin` or `/usr/local/bin`; `None` if nowhere.
pub(crate) fn find(name: &str) -> Option<PathBuf> {
    let candidates = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    candidates
        .into_iter()
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")])
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}
