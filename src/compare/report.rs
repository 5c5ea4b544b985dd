//! A comparison's report, per proxy: identical, differing or not compared (and why), each
//! difference with both values, whether the allow-list accepts it, and the config objects Rudder
//! built the resource from. Printed as a table with the details after it, or as JSON for CI.

use super::allow::AllowList;
use super::diff::Difference;
use serde_json::Value;
use std::fmt::Write;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Identical,
    Differing,
    Unsupported,
}

/// One difference as reported.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Reported {
    #[serde(flatten)]
    pub difference: Difference,
    /// The allow-list's reason, when it accepts this difference.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed: Option<String>,
    /// The config objects behind the resource on Rudder's side (`Kind/namespace/name`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ProxyReport {
    pub proxy: String,
    pub outcome: Outcome,
    /// Why the proxy was not compared, or what the comparison could not cover.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    pub differences: Vec<Reported>,
}

impl ProxyReport {
    /// A compared proxy: differing when a difference is not on the allow-list.
    pub fn compared(
        proxy: &str,
        differences: Vec<Difference>,
        allow: &AllowList,
        sources: impl Fn(&Difference) -> Vec<String>,
        notes: Vec<String>,
    ) -> ProxyReport {
        let differences: Vec<Reported> = differences
            .into_iter()
            .map(|d| Reported {
                allowed: allow.allows(proxy, &d).map(|a| a.reason.clone()),
                sources: sources(&d),
                difference: d,
            })
            .collect();
        let outcome = if differences.iter().all(|d| d.allowed.is_some()) {
            Outcome::Identical
        } else {
            Outcome::Differing
        };
        ProxyReport {
            proxy: proxy.to_string(),
            outcome,
            notes,
            differences,
        }
    }

    pub fn unsupported(proxy: &str, why: String) -> ProxyReport {
        ProxyReport {
            proxy: proxy.to_string(),
            outcome: Outcome::Unsupported,
            notes: vec![why],
            differences: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    /// What each side is, as the text names them (`istiod`, `rudder`; `before`, `after`).
    pub left: String,
    pub right: String,
    /// The words the table uses for identical and differing (`unchanged` and `changed` for a
    /// change's before and after); the JSON keeps `identical` and `differing`.
    #[serde(skip)]
    pub words: [&'static str; 2],
    pub proxies: Vec<ProxyReport>,
}

/// The table's words comparing two control planes.
pub const SHADOW_WORDS: [&str; 2] = ["identical", "differing"];
/// The table's words comparing before and after a change.
pub const CHANGE_WORDS: [&str; 2] = ["unchanged", "changed"];

impl Report {
    pub fn count(&self, outcome: Outcome) -> usize {
        self.proxies.iter().filter(|p| p.outcome == outcome).count()
    }

    /// Every proxy identical (allowed differences aside), or not compared with the allow-list's
    /// leave (`allowed_unsupported`).
    pub fn passes(&self, allowed_unsupported: impl Fn(&str) -> bool) -> bool {
        self.proxies.iter().all(|p| match p.outcome {
            Outcome::Identical => true,
            Outcome::Differing => false,
            Outcome::Unsupported => allowed_unsupported(&p.proxy),
        })
    }

    fn word(&self, outcome: Outcome) -> &'static str {
        match outcome {
            Outcome::Identical => self.words[0],
            Outcome::Differing => self.words[1],
            Outcome::Unsupported => "unsupported",
        }
    }

    pub fn json(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        v["summary"] = serde_json::json!({
            "proxies": self.proxies.len(),
            "identical": self.count(Outcome::Identical),
            "differing": self.count(Outcome::Differing),
            "unsupported": self.count(Outcome::Unsupported),
        });
        v
    }

    /// The table, then each proxy's differences and notes.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let width = self
            .proxies
            .iter()
            .map(|p| p.proxy.len())
            .max()
            .unwrap_or(5)
            .max(5);
        let _ = writeln!(out, "{:width$}  {:11}  DIFFERENCES", "PROXY", "RESULT");
        for p in &self.proxies {
            let allowed = p.differences.iter().filter(|d| d.allowed.is_some()).count();
            let count = match (p.differences.len(), allowed) {
                (0, _) => String::new(),
                (n, 0) => n.to_string(),
                (n, a) => format!("{n} ({a} allowed)"),
            };
            let outcome = self.word(p.outcome);
            let _ = writeln!(out, "{:width$}  {outcome:11}  {count}", p.proxy);
        }
        let _ = writeln!(
            out,
            "{} proxies: {} {}, {} {}, {} unsupported",
            self.proxies.len(),
            self.count(Outcome::Identical),
            self.words[0],
            self.count(Outcome::Differing),
            self.words[1],
            self.count(Outcome::Unsupported)
        );
        for p in &self.proxies {
            if p.differences.is_empty() && p.notes.is_empty() {
                continue;
            }
            let _ = writeln!(out, "\n{}:", p.proxy);
            for note in &p.notes {
                let _ = writeln!(out, "  note: {note}");
            }
            for r in &p.differences {
                let d = &r.difference;
                let path = if d.path.is_empty() {
                    "(whole resource)"
                } else {
                    &d.path
                };
                let _ = writeln!(out, "  {} {} {path}", d.type_url.short(), d.resource);
                let show = |v: &Option<Value>| match v {
                    None => "(absent)".to_string(),
                    Some(v) => short(v),
                };
                let _ = writeln!(out, "      {}: {}", self.left, show(&d.left));
                let _ = writeln!(out, "      {}: {}", self.right, show(&d.right));
                if !r.sources.is_empty() {
                    let _ = writeln!(out, "      from: {}", r.sources.join(", "));
                }
                if let Some(reason) = &r.allowed {
                    let _ = writeln!(out, "      allowed: {reason}");
                }
            }
        }
        out
    }
}

/// A value on one line, cut at 200 characters (the JSON report has it whole).
fn short(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xds::types::TypeUrl;
    use serde_json::json;

    fn difference(path: &str) -> Difference {
        Difference {
            type_url: TypeUrl::Cluster,
            resource: "outbound|80||a".into(),
            path: path.into(),
            left: Some(json!("10s")),
            right: None,
        }
    }

    #[test]
    fn allowed_differences_leave_a_proxy_identical_and_others_fail_the_run() {
        let allow = AllowList::parse("- path: /connectTimeout\n  reason: known\n").unwrap();
        let ok = ProxyReport::compared(
            "p1",
            vec![difference("/connectTimeout")],
            &allow,
            |_| vec![],
            vec![],
        );
        let bad = ProxyReport::compared(
            "p2",
            vec![difference("/lbPolicy")],
            &allow,
            |_| vec!["DestinationRule/default/a".into()],
            vec![],
        );
        assert_eq!(ok.outcome, Outcome::Identical);
        assert_eq!(bad.outcome, Outcome::Differing);
        let report = Report {
            left: "istiod".into(),
            right: "rudder".into(),
            words: SHADOW_WORDS,
            proxies: vec![ok.clone(), ProxyReport::unsupported("z", "ztunnel".into())],
        };
        assert!(!report.passes(|_| false));
        assert!(report.passes(|p| p == "z"));
        let report = Report {
            proxies: vec![ok, bad],
            ..report
        };
        assert!(!report.passes(|_| true));
        let text = report.text();
        assert!(
            text.contains("2 proxies: 1 identical, 1 differing, 0 unsupported"),
            "{text}"
        );
        assert!(text.contains("      istiod: \"10s\"\n      rudder: (absent)\n      from: DestinationRule/default/a"), "{text}");
        assert_eq!(report.json()["summary"]["differing"], 1);
        assert_eq!(report.json()["proxies"][1]["differences"][0]["type"], "cds");
    }
}
