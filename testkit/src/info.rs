//! Reading `INFO` and `CLUSTER INFO` replies: `name:value` lines.

/// The value of the field `name` in an `INFO` reply, trimmed.
pub(crate) fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_a_whole_field_name_only() {
        let info = "# Replication\r\nrole:slave\r\nmaster_port:20001\r\nmaster_link_status:up\r\n";
        assert_eq!(super::field(info, "role"), Some("slave"));
        assert_eq!(super::field(info, "master_port"), Some("20001"));
        assert_eq!(super::field(info, "master"), None);
    }
}
