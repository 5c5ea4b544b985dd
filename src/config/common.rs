//! Types shared by several Istio APIs (istio.io/api `type/v1beta1`, networking common messages).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;

/// Labels as Istio's API types carry them: one ordered map, so equal label sets compare alike.
pub type Labels = BTreeMap<String, String>;

/// A protobuf `google.protobuf.Duration` as Istio accepts it in YAML.
///
/// Istio's CRDs accept Go-style durations (`"1h30m"`, `"250ms"`, `"1.5s"`), a superset of the proto3
/// JSON form (`"1.5s"`), so we parse the Go grammar and print the proto3 form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub std::time::Duration);

impl Duration {
    pub fn as_std(&self) -> std::time::Duration {
        self.0
    }
}

/// Parses a Go `time.ParseDuration` string. Negative durations are rejected: no Istio field allows them.
pub fn parse_go_duration(input: &str) -> Result<std::time::Duration, String> {
    let s = input.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if s.starts_with('-') {
        return Err(format!("duration {input:?} must not be negative"));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Ok(std::time::Duration::ZERO);
    }
    let mut total_nanos: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("missing unit in duration {input:?}"))?;
        if num_len == 0 {
            return Err(format!("invalid duration {input:?}"));
        }
        let (num, after) = rest.split_at(num_len);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(format!("unknown unit {unit:?} in duration {input:?}")),
        };
        let (whole, frac) = num.split_once('.').unwrap_or((num, ""));
        if (whole.is_empty() && frac.is_empty()) || !frac.chars().all(|c| c.is_ascii_digit()) {
            return Err(format!("invalid duration {input:?}"));
        }
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole
                .parse()
                .map_err(|_| format!("invalid duration {input:?}"))?
        };
        let mut nanos = whole
            .checked_mul(unit_nanos)
            .ok_or_else(|| format!("duration {input:?} overflows"))?;
        let mut scale = unit_nanos;
        for digit in frac.chars() {
            scale /= 10;
            if scale == 0 {
                break;
            }
            nanos += u128::from(digit as u32 - '0' as u32) * scale;
        }
        total_nanos = total_nanos
            .checked_add(nanos)
            .ok_or_else(|| format!("duration {input:?} overflows"))?;
        rest = next;
    }
    let secs = u64::try_from(total_nanos / 1_000_000_000)
        .map_err(|_| format!("duration {input:?} overflows"))?;
    Ok(std::time::Duration::new(
        secs,
        (total_nanos % 1_000_000_000) as u32,
    ))
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_go_duration(&s)
            .map(Duration)
            .map_err(serde::de::Error::custom)
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl fmt::Display for Duration {
    /// proto3 JSON form: seconds with up to nine fractional digits and an `s` suffix.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.as_secs();
        let nanos = self.0.subsec_nanos();
        if nanos == 0 {
            write!(f, "{secs}s")
        } else {
            let frac = format!("{nanos:09}");
            write!(f, "{secs}.{}s", frac.trim_end_matches('0'))
        }
    }
}

/// `StringMatch`: at most one of exact, prefix or regex (RE2 syntax). None (`{}`) is valid Istio:
/// a header or query parameter matched by presence, a URI that matches any path.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(try_from = "StringMatchFields", into = "StringMatchFields")]
#[schemars(with = "StringMatchFields")]
pub enum StringMatch {
    Exact(String),
    Prefix(String),
    Regex(String),
    /// `{}`: no match type set.
    Any,
}

/// How a `StringMatch` is written: the proto's oneof as optional fields.
#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StringMatchFields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exact: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    regex: Option<String>,
}

impl TryFrom<StringMatchFields> for StringMatch {
    type Error = String;
    fn try_from(f: StringMatchFields) -> Result<StringMatch, String> {
        match (f.exact, f.prefix, f.regex) {
            (None, None, None) => Ok(StringMatch::Any),
            (Some(e), None, None) => Ok(StringMatch::Exact(e)),
            (None, Some(p), None) => Ok(StringMatch::Prefix(p)),
            (None, None, Some(r)) => Ok(StringMatch::Regex(r)),
            _ => Err("at most one of exact, prefix and regex may be set".into()),
        }
    }
}

impl From<StringMatch> for StringMatchFields {
    fn from(m: StringMatch) -> StringMatchFields {
        let mut f = StringMatchFields::default();
        match m {
            StringMatch::Exact(e) => f.exact = Some(e),
            StringMatch::Prefix(p) => f.prefix = Some(p),
            StringMatch::Regex(r) => f.regex = Some(r),
            StringMatch::Any => {}
        }
        f
    }
}

/// `istio.type.v1beta1.WorkloadSelector` (security and telemetry APIs).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadSelector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
}

/// `networking.v1alpha3.WorkloadSelector` (networking API: `labels`, not `matchLabels`).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// `istio.type.v1beta1.PolicyTargetReference`.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyTargetReference {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

impl schemars::JsonSchema for Duration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A duration: Go syntax (\"1h30m\", \"250ms\") or protobuf JSON (\"1.5s\")."
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration as Std;

    #[test]
    fn go_durations_parse() {
        assert_eq!(parse_go_duration("10s").unwrap(), Std::from_secs(10));
        assert_eq!(parse_go_duration("1.5s").unwrap(), Std::from_millis(1500));
        assert_eq!(parse_go_duration("250ms").unwrap(), Std::from_millis(250));
        assert_eq!(parse_go_duration("1h30m").unwrap(), Std::from_secs(5400));
        assert_eq!(parse_go_duration("0").unwrap(), Std::ZERO);
        assert_eq!(parse_go_duration("100us").unwrap(), Std::from_micros(100));
        assert_eq!(parse_go_duration(".5s").unwrap(), Std::from_millis(500));
    }

    #[test]
    fn bad_durations_are_rejected() {
        for bad in ["", "10", "s", "-1s", "1x", "1..5s", "1.5.2s"] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?} should fail");
        }
    }

    #[test]
    fn durations_print_as_proto3_json() {
        assert_eq!(Duration(Std::from_millis(1500)).to_string(), "1.5s");
        assert_eq!(Duration(Std::from_secs(30)).to_string(), "30s");
        assert_eq!(Duration(Std::from_nanos(1)).to_string(), "0.000000001s");
    }
}
