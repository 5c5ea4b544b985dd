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

/// The pairs `(i, j)`, `i < j`, of `hosts` that match each other (as `matches`), in that order, at
/// most `limit` of them. Hosts are indexed by their dot-suffixes, so the cost grows with the
/// number of hosts and labels, not with its square: a VirtualService may list a million hosts.
/// Hosts must be valid names (`*`, `*.<suffix>` or a name without `*`).
pub fn overlapping_pairs(hosts: &[String], limit: usize) -> Vec<(usize, usize)> {
    use std::collections::HashMap;
    // `*` and `*.x` by their suffix ("" and ".x"); every host by each of its dot-suffixes, its
    // own name (for exact duplicates) and "" (which `*` matches).
    let mut wildcards: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut by_suffix: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut exact: HashMap<&str, Vec<usize>> = HashMap::new();
    let dot_suffixes = |h: &'_ str| -> Vec<usize> {
        let mut at: Vec<usize> = h.match_indices('.').map(|(k, _)| k).collect();
        at.push(h.len());
        at
    };
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    for (j, h) in hosts.iter().enumerate() {
        let mut matched: Vec<usize> = Vec::new();
        let own_suffixes = dot_suffixes(h);
        match wildcard_suffix(h) {
            None => {
                matched.extend(exact.get(h.as_str()).into_iter().flatten());
                for &k in &own_suffixes {
                    matched.extend(wildcards.get(&h[k..]).into_iter().flatten());
                }
            }
            Some(sb) => {
                // Earlier hosts ending with `sb` (names and longer wildcards alike)...
                matched.extend(by_suffix.get(sb).into_iter().flatten());
                // ...and earlier wildcards whose suffix `sb` ends with.
                for &k in &own_suffixes {
                    let tail = &h[k..];
                    if tail.len() < sb.len() {
                        matched.extend(wildcards.get(tail).into_iter().flatten());
                    }
                }
            }
        }
        matched.sort_unstable();
        matched.dedup();
        pairs.extend(matched.into_iter().map(|i| (i, j)));
        if pairs.len() >= limit {
            break;
        }
        match wildcard_suffix(h) {
            Some(s) => wildcards.entry(s).or_default().push(j),
            None => exact.entry(h.as_str()).or_default().push(j),
        }
        for &k in &own_suffixes {
            by_suffix.entry(&h[k..]).or_default().push(j);
        }
    }
    pairs.sort_unstable();
    pairs.truncate(limit);
    pairs
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
    fn overlapping_pairs_are_the_pairs_that_match() {
        let hosts: Vec<String> = [
            "a.foo.com",
            "*.foo.com",
            "b.bar.com",
            "*.com",
            "a.foo.com",
            "*",
            "foo.com",
            "*.bar.foo.com",
            "x.org",
        ]
        .iter()
        .map(|h| h.to_string())
        .collect();
        let mut want = Vec::new();
        for i in 0..hosts.len() {
            for j in i + 1..hosts.len() {
                if matches(&hosts[i], &hosts[j]) {
                    want.push((i, j));
                }
            }
        }
        assert_eq!(overlapping_pairs(&hosts, usize::MAX), want);
        assert_eq!(overlapping_pairs(&hosts, 3).len(), 3);
        let many = vec!["h.example.com".to_string(); 100_000];
        assert_eq!(overlapping_pairs(&many, 100).len(), 100);
    }

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
