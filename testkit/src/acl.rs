//! ACL users on a test server: set with `ACL SETUSER` through an admin connection, and set again
//! when the server restarts; URLs that log in as one of them.

use crate::RedisServer;

impl RedisServer {
    /// Creates or changes the ACL user `user` with `ACL SETUSER user rules...`, for example a user
    /// that may only touch keys under `lock:` and run scripts:
    /// `server.acl_setuser("locker", &["on", ">pw", "resetkeys", "~lock:*", "+@all"])`.
    /// The rules are kept and sent again after [`RedisServer::restart`] or
    /// [`RedisServer::start_again`], whose fresh server would otherwise not know the user.
    /// Panics with the server's reply when it refuses a rule.
    pub fn acl_setuser(&self, user: &str, rules: &[&str]) {
        let args: Vec<String> = std::iter::once(user)
            .chain(rules.iter().copied())
            .map(str::to_owned)
            .collect();
        self.setuser(&args);
        self.acl_users.lock().expect("ACL users lock").push(args);
    }

    /// Sends every `ACL SETUSER` given so far again, in order (after a restart).
    pub(crate) fn set_acl_users_again(&self) {
        let users = self.acl_users.lock().expect("ACL users lock").clone();
        for args in &users {
            self.setuser(args);
        }
    }

    fn setuser(&self, args: &[String]) {
        let () = self
            .query(redis::cmd("ACL").arg("SETUSER").arg(args))
            .unwrap_or_else(|error| panic!("ACL SETUSER {}: {error}", args.join(" ")));
    }

    /// The server's URL logging in as `user` with `password` (both percent-encoded):
    /// `redis://user:password@127.0.0.1:P`, or `rediss://...` on a TLS server.
    pub fn url_as(&self, user: &str, password: &str) -> String {
        let url = self.url();
        let (scheme, address) = url.split_once("://").expect("a URL with a scheme");
        format!(
            "{scheme}://{}:{}@{address}",
            percent_encode(user),
            percent_encode(password)
        )
    }
}

/// Every byte but RFC 3986's unreserved characters as `%XX`.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(byte).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::percent_encode;

    #[test]
    fn percent_encoding_keeps_unreserved_characters_only() {
        assert_eq!(percent_encode("locker-1.a_b~"), "locker-1.a_b~");
        assert_eq!(percent_encode("p@ss:w/rd"), "p%40ss%3Aw%2Frd");
    }
}
