//! Node paths: the rules a path must keep before it is sent (those of the Java client's
//! `PathUtils`), and the chroot, prefixed to every path sent and stripped from every path
//! received.

use super::Error;

/// Checks `path` as the server would, without a round trip. A sequential create's path is
/// checked with a digit after it: it may end with `/` (the server appends the counter).
pub(crate) fn check(path: &str, sequential: bool) -> Result<(), Error> {
    let bad = |why: &str| Err(Error::BadPath(format!("{path:?}: {why}")));
    if path.is_empty() {
        return bad("a path must not be empty");
    }
    if !path.starts_with('/') {
        return bad("a path must start with '/'");
    }
    if path.len() == 1 && !sequential {
        return Ok(());
    }
    if path.ends_with('/') && !sequential {
        return bad("a path must not end with '/'");
    }
    if let Some(c) = path.chars().find(|&c| invalid(c)) {
        return bad(&format!("a path must not hold the character {:?}", c));
    }
    // The last segment of a sequential path is completed by the server's counter.
    let segments: Vec<&str> = path[1..].split('/').collect();
    let last = segments.len() - 1;
    for (index, segment) in segments.iter().enumerate() {
        let completed = sequential && index == last;
        if segment.is_empty() && !completed {
            return bad("a path must not have an empty segment");
        }
        if matches!(*segment, "." | "..") && !completed {
            return bad("a path must not have a '.' or '..' segment");
        }
    }
    Ok(())
}

/// Characters ZooKeeper refuses in a path: NUL and other control characters, and the ranges
/// its Java client refuses (private use, non-characters).
fn invalid(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{e000}'..='\u{f8ff}' | '\u{fff0}'..='\u{ffff}')
}

/// The node every path of a session is relative to, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chroot(Option<String>);

impl Chroot {
    /// The chroot of a configuration: none for `None` or `"/"`, otherwise a path that must be
    /// valid.
    pub(crate) fn new(chroot: Option<&str>) -> Result<Chroot, Error> {
        match chroot {
            None | Some("/") => Ok(Chroot(None)),
            Some(root) => {
                check(root, false).map_err(|error| Error::BadPath(format!("chroot: {error}")))?;
                Ok(Chroot(Some(root.to_owned())))
            }
        }
    }

    /// The path the server sees for the client's `path`.
    pub(crate) fn prefix(&self, path: &str) -> String {
        match &self.0 {
            None => path.to_owned(),
            Some(root) if path == "/" => root.clone(),
            Some(root) => format!("{root}{path}"),
        }
    }

    /// The client's path for a path the server sent; one outside the chroot (which the server
    /// never sends) is left as it is.
    pub(crate) fn strip(&self, path: &str) -> String {
        let Some(root) = &self.0 else {
            return path.to_owned();
        };
        match path.strip_prefix(root.as_str()) {
            Some("") => "/".to_owned(),
            Some(rest) if rest.starts_with('/') => rest.to_owned(),
            _ => {
                log::debug!("zookeeper sent path {path:?}, outside the chroot {root:?}");
                path.to_owned()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_checked_as_the_server_would() {
        for good in ["/", "/a", "/a/b", "/a.b/..c", "/a b/ü"] {
            assert_eq!(check(good, false), Ok(()), "{good:?}");
        }
        for bad in [
            "", "a", "/a/", "//a", "/a//b", "/a/./b", "/a/..", "/.", "/a\0b", "/a\u{1}",
        ] {
            assert!(
                matches!(check(bad, false), Err(Error::BadPath(_))),
                "{bad:?}"
            );
        }
        for good in ["/", "/locks/", "/locks/lock-", "/."] {
            assert_eq!(check(good, true), Ok(()), "{good:?}");
        }
        for bad in ["", "locks/", "//", "/a//", "/../x"] {
            assert!(check(bad, true).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_chroot_is_prefixed_and_stripped() {
        let root = Chroot::new(Some("/app")).expect("valid");
        assert_eq!(root.prefix("/"), "/app");
        assert_eq!(root.prefix("/a/b"), "/app/a/b");
        assert_eq!(root.strip("/app"), "/");
        assert_eq!(root.strip("/app/a"), "/a");
        assert_eq!(root.strip("/apple"), "/apple");
        let none = Chroot::new(Some("/")).expect("valid");
        assert_eq!(none.prefix("/a"), "/a");
        assert_eq!(none.strip("/a"), "/a");
        assert!(Chroot::new(Some("app")).is_err());
        assert!(Chroot::new(Some("/app/")).is_err());
    }
}
