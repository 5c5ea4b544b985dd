//! Hostname matching with Istio's wildcard semantics (`*.example.com`, `*`).

fn wildcard_suffix(host: &str) -> Option<&str> {
    host.strip_prefix('*')
}

/// True when either host matches the other (used to find overlapping hosts).
pub fn matches(a: &str, b: &str) -> bool {
    match (wildcard_suffix(a), wildcard_suffix(b)) {
        (Some(sa), Some(sb)) => sa.ends_with(sb) || sb.ends_with(sa),
        (Some(sa), None) => b.ends_with(sa),
        (None, Some(sb)) => a.ends_with(sb),
        (None, None) => a == b,
    }
}

/// True when every name `a` matches is also matched by `b`.
pub fn subset_of(a: &str, b: &str) -> bool {
    match (wildcard_suffix(a), wildcard_suffix(b)) {
        (Some(sa), Some(sb)) => sa.ends_with(sb),
        (None, Some(sb)) => a.ends_with(sb),
        (Some(_), None) => false,
        (None, None) => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_matching() {
        assert!(matches("*.foo.com", "bar.foo.com"));
        assert!(matches("*.foo.com", "*.com"));
        assert!(matches("*", "anything.local"));
        assert!(!matches("*.foo.com", "foo.org"));
        assert!(matches("a.b", "a.b"));
        assert!(!matches("a.b", "a.c"));
    }

    #[test]
    fn wildcard_subsets() {
        assert!(subset_of("bar.foo.com", "*.foo.com"));
        assert!(subset_of("*.bar.foo.com", "*.foo.com"));
        assert!(!subset_of("*.com", "*.foo.com"));
        assert!(subset_of("x", "*"));
        assert!(!subset_of("*.foo.com", "bar.foo.com"));
    }
}
