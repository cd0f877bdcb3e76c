//! A URL with its passwords hidden, which is the only form of a URL this crate ever shows: in
//! errors, logs and `Debug` output.

/// `url` with its passwords replaced by `***`: the password of its user information
/// (`redis://u:***@h:1/0`), and on a Unix socket's URL the `pass` (or `password`) parameter
/// (`redis+unix:///run/redis.sock?pass=***`). Text that is not a URL at all is shown up to its
/// last `@` as `***`, or as `***` without one.
///
/// A password may hold `/`, `?`, `#` or `@` unescaped, so the user information is taken to end at
/// the *last* `@` of the URL, wherever it stands: hiding too much beats showing a password. A URL
/// without `@` whose port is not a number (the front of a URL cut at a `,` inside its password,
/// for one) is shown without its authority: `redis://***`. Of a query, only `db`, `user` and
/// `protocol` are shown: any other parameter, or piece of one (a password holding `&`), is
/// `***`; so is a fragment other than `#insecure`.
pub fn redact(url: &str) -> String {
    // As the URL parser reads it: without outer blanks, tabs or line breaks.
    let url: String = url
        .trim_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    if let Some((scheme, rest)) = socket_scheme(&url) {
        return format!("{scheme}:{}", redact_socket(rest));
    }
    let (scheme, rest) = split_scheme(&url);
    let Some((userinfo, host_and_tail)) = split_userinfo(rest) else {
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(authority_end);
        if scheme.is_empty() {
            // Not a URL: maybe a piece of one, cut inside its password.
            return "***".to_owned();
        }
        let tail = redact_path_and_tail(tail);
        if plausible_authority(authority) {
            return format!("{scheme}{authority}{tail}");
        }
        return format!("{scheme}***{tail}");
    };
    let user = match userinfo.split_once(':') {
        Some((user, _)) if !scheme.is_empty() => format!("{user}:***"),
        _ if scheme.is_empty() => "***".to_owned(),
        _ => userinfo.to_owned(),
    };
    format!("{scheme}{user}{}", redact_path_and_tail(host_and_tail))
}

/// The schemes the `redis` crate reads as a Unix socket's path, with its login in the query.
const SOCKET_SCHEMES: [&str; 3] = ["redis+unix", "valkey+unix", "unix"];

/// The query parameters shown as they are; every other one is hidden.
const SHOWN_PARAMETERS: [&str; 3] = ["db", "user", "protocol"];

/// The query parameters that carry a password: shown by name, their value hidden.
const PASSWORD_PARAMETERS: [&str; 2] = ["pass", "password"];

/// A Unix socket URL's scheme (lowercase, as the URL parser reads it) and what follows its `:`.
fn socket_scheme(url: &str) -> Option<(String, &str)> {
    let (scheme, rest) = url.split_once(':')?;
    let scheme = scheme.to_ascii_lowercase();
    SOCKET_SCHEMES
        .contains(&scheme.as_str())
        .then_some((scheme, rest))
}

/// What follows a Unix socket URL's `scheme:`, with its passwords hidden: user information
/// (up to the last `@` before the query), an authority holding a `:` (a password cut short by
/// a `?` or `#` it holds), and the query's passwords.
fn redact_socket(rest: &str) -> String {
    let location_end = rest.find(['?', '#']).unwrap_or(rest.len());
    let (location, tail) = rest.split_at(location_end);
    let slashes = if location.starts_with("//") { "//" } else { "" };
    let location = if let Some(at) = location.rfind('@') {
        format!("{slashes}***{}", &location[at..])
    } else {
        let after = &location[slashes.len()..];
        let authority_end = if slashes.is_empty() {
            0
        } else {
            after.find('/').unwrap_or(after.len())
        };
        let (authority, path) = after.split_at(authority_end);
        if authority.contains(':') {
            format!("{slashes}***{path}")
        } else {
            location.to_owned()
        }
    };
    format!("{location}{}", redact_tail(tail))
}

/// A URL's path, query and fragment (after its host), with the query's passwords hidden.
fn redact_path_and_tail(text: &str) -> String {
    let tail_start = text.find(['?', '#']).unwrap_or(text.len());
    let (path, tail) = text.split_at(tail_start);
    format!("{path}{}", redact_tail(tail))
}

/// A URL's `?query#fragment` (either may be absent), with every parameter but those shown, and
/// every fragment but `#insecure`, replaced by `***`.
fn redact_tail(tail: &str) -> String {
    let (query, fragment) = match tail.find('#') {
        Some(hash) => (&tail[..hash], Some(&tail[hash + 1..])),
        None => (tail, None),
    };
    let mut shown = String::new();
    if let Some(query) = query.strip_prefix('?') {
        let parameters: Vec<String> = query.split('&').map(redact_parameter).collect();
        shown.push('?');
        shown.push_str(&parameters.join("&"));
    }
    match fragment {
        Some("insecure") => shown.push_str("#insecure"),
        Some(_) => shown.push_str("#***"),
        None => {}
    }
    shown
}

/// One `key=value` of a query, shown if its key is one of [`SHOWN_PARAMETERS`], its value
/// hidden if its key names a password, and hidden whole otherwise.
fn redact_parameter(parameter: &str) -> String {
    match parameter.split_once('=') {
        _ if parameter.is_empty() => String::new(),
        Some((key, _)) if PASSWORD_PARAMETERS.contains(&key) => format!("{key}=***"),
        Some((key, value)) if SHOWN_PARAMETERS.contains(&key) => format!("{key}={value}"),
        _ => "***".to_owned(),
    }
}

/// `url` split after its `scheme://`, or `("", url)` without one.
fn split_scheme(url: &str) -> (&str, &str) {
    match url.find("://") {
        Some(at) => url.split_at(at + 3),
        None => ("", url),
    }
}

/// What follows the scheme, split at its last `@` into the user information and the rest (which
/// starts with the `@`).
fn split_userinfo(rest: &str) -> Option<(&str, &str)> {
    rest.rfind('@').map(|at| rest.split_at(at))
}

/// Whether `authority` (with no user information) reads as `host`, `host:port` or `[v6]:port`.
fn plausible_authority(authority: &str) -> bool {
    match authority.rfind(':') {
        Some(colon) if !authority[colon..].contains(']') => {
            let (host, port) = (&authority[..colon], &authority[colon + 1..]);
            !host.is_empty() && !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit())
        }
        _ => true,
    }
}

/// `text` with every occurrence of `url`'s passwords replaced by `***` (for messages of other
/// libraries that quote the URL).
pub(super) fn redact_in(text: &str, url: &str) -> String {
    passwords_of(url)
        .into_iter()
        .filter(|password| !password.is_empty())
        .fold(text.to_owned(), |text, password| {
            text.replace(password, "***")
        })
}

/// The passwords `url` may hold: its user information's, and its query's password parameters'.
fn passwords_of(url: &str) -> Vec<&str> {
    let mut passwords = Vec::new();
    if let Some((userinfo, _)) = split_userinfo(split_scheme(url).1) {
        if let Some((_, password)) = userinfo.split_once(':') {
            passwords.push(password);
        }
    }
    if let Some((_, query)) = url.split_once('?') {
        let query = query.split('#').next().unwrap_or_default();
        for parameter in query.split('&') {
            if let Some((key, value)) = parameter.split_once('=') {
                if PASSWORD_PARAMETERS.contains(&key) {
                    passwords.push(value);
                }
            }
        }
    }
    passwords
}
