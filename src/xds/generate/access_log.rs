//! MeshConfig's Envoy access log (`accessLogFile`, `accessLogEncoding`, `accessLogFormat`,
//! `disableEnvoyListenerLog`), added by a finishing pass as istiod adds it: every HTTP connection
//! manager and TCP proxy logs each request or connection; gateway listeners and the sidecar's
//! `virtualOutbound`/`virtualInbound` also log connections that match no filter chain (`NR`).
//! Proxyless gRPC clients have no access log.

use super::finish::{Built, Class, Pass, Typed};
use super::util::any;
use crate::model::mesh::AccessLogSettings;
use crate::xds::context::{PushContext, ScopeView};
use envoy_types::pb::envoy::config::accesslog::v3::{
    AccessLog, AccessLogFilter, ResponseFlagFilter, access_log, access_log_filter,
};
use envoy_types::pb::envoy::config::core::v3::{
    DataSource, JsonFormatOptions, SubstitutionFormatString, TypedExtensionConfig, data_source,
    substitution_format_string,
};
use envoy_types::pb::envoy::extensions::access_loggers::file::v3::{
    FileAccessLog, file_access_log,
};
use envoy_types::pb::google::protobuf::{Struct, Value, value};

/// Istio's default text format (what `istioctl` users and log pipelines expect).
pub const ISTIO_TEXT_FORMAT: &str = concat!(
    "[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%\" ",
    "%RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% ",
    "\"%UPSTREAM_TRANSPORT_FAILURE_REASON%\" %BYTES_RECEIVED% %BYTES_SENT% %DURATION% ",
    "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% \"%REQ(X-FORWARDED-FOR)%\" \"%REQ(USER-AGENT)%\" ",
    "\"%REQ(X-REQUEST-ID)%\" \"%REQ(:AUTHORITY)%\" \"%UPSTREAM_HOST%\" %UPSTREAM_CLUSTER_RAW% ",
    "%UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_REMOTE_ADDRESS% ",
    "%REQUESTED_SERVER_NAME% %ROUTE_NAME%\n"
);

/// Istio's default JSON fields, each an Envoy command operator.
pub const ISTIO_JSON_FIELDS: &[(&str, &str)] = &[
    ("authority", "%REQ(:AUTHORITY)%"),
    ("bytes_received", "%BYTES_RECEIVED%"),
    ("bytes_sent", "%BYTES_SENT%"),
    (
        "connection_termination_details",
        "%CONNECTION_TERMINATION_DETAILS%",
    ),
    ("downstream_local_address", "%DOWNSTREAM_LOCAL_ADDRESS%"),
    ("downstream_remote_address", "%DOWNSTREAM_REMOTE_ADDRESS%"),
    ("duration", "%DURATION%"),
    ("method", "%REQ(:METHOD)%"),
    ("path", "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%"),
    ("protocol", "%PROTOCOL%"),
    ("request_id", "%REQ(X-REQUEST-ID)%"),
    ("requested_server_name", "%REQUESTED_SERVER_NAME%"),
    ("response_code", "%RESPONSE_CODE%"),
    ("response_code_details", "%RESPONSE_CODE_DETAILS%"),
    ("response_flags", "%RESPONSE_FLAGS%"),
    ("route_name", "%ROUTE_NAME%"),
    ("start_time", "%START_TIME%"),
    ("upstream_cluster", "%UPSTREAM_CLUSTER_RAW%"),
    ("upstream_host", "%UPSTREAM_HOST%"),
    ("upstream_local_address", "%UPSTREAM_LOCAL_ADDRESS%"),
    (
        "upstream_service_time",
        "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%",
    ),
    (
        "upstream_transport_failure_reason",
        "%UPSTREAM_TRANSPORT_FAILURE_REASON%",
    ),
    ("user_agent", "%REQ(USER-AGENT)%"),
    ("x_forwarded_for", "%REQ(X-FORWARDED-FOR)%"),
];

const FILE_ACCESS_LOG: &str = "envoy.access_loggers.file";
const REQ_WITHOUT_QUERY: &str = "%REQ_WITHOUT_QUERY";

/// The pass that adds MeshConfig's access log.
pub struct AccessLogs;

impl Pass for AccessLogs {
    fn name(&self) -> &'static str {
        "access-logs"
    }

    fn applies(&self, ctx: &PushContext, _scope: &ScopeView) -> bool {
        ctx.mesh.access_log.is_some()
    }

    fn apply(&self, ctx: &PushContext, _scope: &ScopeView, resources: &mut Vec<Typed>) {
        let Some(settings) = &ctx.mesh.access_log else {
            return;
        };
        let log = file_access_log(settings, None);
        let unmatched = file_access_log(settings, Some(no_route_filter()));
        for r in resources.iter_mut() {
            if matches!(r.class, Class::Proxyless | Class::ProxylessServer) {
                continue;
            }
            let with_listener_log = r.class == Class::Gateway
                || r.name == "virtualOutbound"
                || r.name == "virtualInbound";
            r.edit_http_connection_managers(|_, hcm| hcm.access_log.push(log.clone()));
            r.edit_tcp_proxies(|tcp| tcp.access_log.push(log.clone()));
            if let Built::Listener(l) = &mut r.built
                && settings.listener
                && with_listener_log
            {
                l.access_log.push(unmatched.clone());
            }
        }
    }
}

/// Connections no filter chain took (`NR`): the only ones the filters' own logs miss.
fn no_route_filter() -> AccessLogFilter {
    AccessLogFilter {
        filter_specifier: Some(access_log_filter::FilterSpecifier::ResponseFlagFilter(
            ResponseFlagFilter {
                flags: vec!["NR".into()],
            },
        )),
    }
}

/// The file access log MeshConfig asks for, as istiod writes it.
pub fn file_access_log(settings: &AccessLogSettings, filter: Option<AccessLogFilter>) -> AccessLog {
    let mut format = if settings.json {
        let fields: Vec<(String, String)> =
            parse_json_format(&settings.format).unwrap_or_else(|| {
                ISTIO_JSON_FIELDS
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            });
        let uses_req_without_query = fields.iter().any(|(_, v)| v.contains(REQ_WITHOUT_QUERY));
        SubstitutionFormatString {
            format: Some(substitution_format_string::Format::JsonFormat(Struct {
                fields: fields
                    .into_iter()
                    .map(|(k, v)| {
                        (
                            k,
                            Value {
                                kind: Some(value::Kind::StringValue(v)),
                            },
                        )
                    })
                    .collect(),
            })),
            // Properties in the order written, as istiod asks.
            json_format_options: Some(JsonFormatOptions::default()),
            formatters: req_without_query(uses_req_without_query),
            ..Default::default()
        }
    } else {
        let text = if settings.format.is_empty() {
            ISTIO_TEXT_FORMAT.to_string()
        } else if settings.format.ends_with('\n') {
            settings.format.clone()
        } else {
            format!("{}\n", settings.format)
        };
        SubstitutionFormatString {
            formatters: req_without_query(text.contains(REQ_WITHOUT_QUERY)),
            format: Some(substitution_format_string::Format::TextFormatSource(
                DataSource {
                    specifier: Some(data_source::Specifier::InlineString(text)),
                    ..Default::default()
                },
            )),
            ..Default::default()
        }
    };
    format.omit_empty_values = false;
    AccessLog {
        name: FILE_ACCESS_LOG.into(),
        filter,
        config_type: Some(access_log::ConfigType::TypedConfig(any(&FileAccessLog {
            path: settings.path.clone(),
            access_log_format: Some(file_access_log::AccessLogFormat::LogFormat(format)),
        }))),
    }
}

/// A custom JSON format: an object of string fields (istiod logs and falls back to its default
/// when it does not parse).
fn parse_json_format(text: &str) -> Option<Vec<(String, String)>> {
    if text.trim().is_empty() {
        return None;
    }
    let parsed: serde_json::Map<String, serde_json::Value> = match serde_json::from_str(text) {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(error = %e, "accessLogFormat is not a JSON object; Istio's default JSON format is used");
            return None;
        }
    };
    Some(
        parsed
            .into_iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => (k, s),
                other => (k, other.to_string()),
            })
            .collect(),
    )
}

/// Envoy's `%REQ_WITHOUT_QUERY(...)%` operator lives in a formatter extension, added when used.
fn req_without_query(used: bool) -> Vec<TypedExtensionConfig> {
    use envoy_types::pb::envoy::extensions::formatter::req_without_query::v3::ReqWithoutQuery;
    if !used {
        return Vec::new();
    }
    vec![TypedExtensionConfig {
        name: "envoy.formatter.req_without_query".into(),
        typed_config: Some(any(&ReqWithoutQuery::default())),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_formats_end_in_a_newline_and_json_ones_fall_back_to_istios() {
        let settings = |json: bool, format: &str| AccessLogSettings {
            path: "/dev/stdout".into(),
            json,
            format: format.into(),
            listener: true,
        };
        let text = |log: AccessLog| {
            let Some(access_log::ConfigType::TypedConfig(a)) = log.config_type else {
                panic!()
            };
            let f: FileAccessLog = prost::Message::decode(a.value.as_slice()).unwrap();
            format!("{f:?}")
        };
        assert!(
            text(file_access_log(&settings(false, "%PROTOCOL%"), None)).contains("%PROTOCOL%\\n")
        );
        assert!(text(file_access_log(&settings(false, ""), None)).contains("%ROUTE_NAME%\\n"));
        let fallback = text(file_access_log(&settings(true, "not json"), None));
        assert!(
            fallback.contains("upstream_transport_failure_reason"),
            "{fallback}"
        );
        let custom = text(file_access_log(
            &settings(true, r#"{"p": "%REQ_WITHOUT_QUERY(:PATH)%"}"#),
            None,
        ));
        assert!(custom.contains("req_without_query"), "{custom}");
    }
}
