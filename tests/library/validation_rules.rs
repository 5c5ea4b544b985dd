//! Every validation rule with a failing case and a passing twin. Failing cases also check that the error
//! names the field path, so a person knows where to look.

use rudder::config::parse_yaml;
use rudder::validation::validate;

/// Parses one object of `kind` (with a group/version Istio serves) and validates it.
fn check(kind: &str, name: &str, spec: &str) -> Result<(), Vec<String>> {
    let api = match kind {
        "PeerAuthentication" | "AuthorizationPolicy" | "RequestAuthentication" => {
            "security.istio.io/v1"
        }
        "Telemetry" => "telemetry.istio.io/v1",
        "EnvoyFilter" => "networking.istio.io/v1alpha3",
        _ => "networking.istio.io/v1",
    };
    let indented: String = spec.lines().map(|l| format!("  {l}\n")).collect();
    let yaml = format!(
        "apiVersion: {api}\nkind: {kind}\nmetadata:\n  name: {name}\n  namespace: ns\nspec:\n{indented}"
    );
    let parsed = parse_yaml(&yaml, "default");
    assert!(
        parsed.errors.is_empty(),
        "parse failed: {:?}\n{yaml}",
        parsed.errors
    );
    assert_eq!(parsed.configs.len(), 1, "{yaml}");
    validate(&parsed.configs[0]).map_err(|errs| errs.iter().map(|e| e.to_string()).collect())
}

/// (kind, failing spec, expected message fragment incl. path, passing spec)
type Case = (&'static str, &'static str, &'static str, &'static str);

const CASES: &[Case] = &[
    // ---- VirtualService
    // A JWT claim route in either form istiod reads (`.a.b` or `[a][b]`); anything else after the
    // prefix is not a header name.
    (
        "VirtualService",
        "hosts: [a]\ngateways: [gw]\nhttp: [{match: [{withoutHeaders: {'@request.auth.claims': {exact: x}}}], route: [{destination: {host: a}}]}]",
        "spec.http[0].match[0].withoutHeaders",
        "hosts: [a]\ngateways: [gw]\nhttp: [{match: [{withoutHeaders: {'@request.auth.claims[groups]': {exact: x}}}], route: [{destination: {host: a}}]}]",
    ),
    (
        "VirtualService",
        "hosts: []\ngateways: [gw]\nhttp: [{route: [{destination: {host: a}}]}]",
        "spec.gateways: delegate virtual service must have no gateways specified",
        "hosts: []\nhttp: [{route: [{destination: {host: a}}]}]",
    ),
    (
        "VirtualService",
        "hosts: [\"*\"]\nhttp: [{route: [{destination: {host: a}}]}]",
        "spec.hosts[0]: wildcard host * is not allowed for virtual services bound to the mesh gateway",
        "hosts: [\"*\"]\ngateways: [gw]\nhttp: [{route: [{destination: {host: a}}]}]",
    ),
    (
        "VirtualService",
        "hosts: [\"foo.*.com\"]\nhttp: [{route: [{destination: {host: a}}]}]",
        "spec.hosts[0]: domain name \"foo.*.com\" invalid",
        "hosts: [\"*.foo.com\"]\nhttp: [{route: [{destination: {host: a}}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a.foo.com, \"*.foo.com\"]\nhttp: [{route: [{destination: {host: a}}]}]",
        "spec.hosts: duplicate hosts in virtual service: a.foo.com & *.foo.com",
        "hosts: [a.foo.com, b.foo.com]\nhttp: [{route: [{destination: {host: a}}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a]",
        "spec: http, tcp or tls must be provided in virtual service",
        "hosts: [a]\ntcp: [{route: [{destination: {host: a}}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\ngateways: [\"bad_ns/gw\"]\nhttp: [{route: [{destination: {host: a}}]}]",
        "spec.gateways[0]: invalid value for namespace: \"bad_ns\"",
        "hosts: [a]\ngateways: [istio-system/gw, mesh]\nhttp: [{route: [{destination: {host: a}}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{name: x}]",
        "spec.http[0]: HTTP route, redirect or direct_response is required",
        "hosts: [a]\nhttp: [{name: x, directResponse: {status: 503}}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{redirect: {uri: /x}, route: [{destination: {host: a}}]}]",
        "spec.http[0]: HTTP route cannot contain both route and redirect",
        "hosts: [a]\nhttp: [{redirect: {uri: /x}}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{redirect: {uri: /x}, fault: {abort: {httpStatus: 500}}}]",
        "HTTP route cannot contain both fault and redirect",
        "hosts: [a]\nhttp: [{redirect: {uri: /x, redirectCode: 308}}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{redirect: {uri: /x}, rewrite: {uri: /y}}]",
        "HTTP route rule cannot contain both rewrite and redirect",
        "hosts: [a]\nhttp: [{rewrite: {uri: /y}, route: [{destination: {host: a}}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{redirect: {uri: /x, redirectCode: 200}}]",
        "spec.http[0].redirect.redirectCode: 200 is not a valid redirect code",
        "hosts: [a]\nhttp: [{redirect: {uri: /x, redirectCode: 302}}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{redirect: {redirectCode: 302}}]",
        "spec.http[0].redirect: redirect must specify URI, authority, scheme, or port",
        "hosts: [a]\nhttp: [{redirect: {port: 8443, scheme: https}}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{directResponse: {status: 42}}]",
        "spec.http[0].directResponse.status: HTTP status 42 is not in range 200-599",
        "hosts: [a]\nhttp: [{directResponse: {status: 404, body: {string: nope}}}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a, subset: v1}, weight: 0}, {destination: {host: a, subset: v2}, weight: 0}]}]",
        "spec.http[0].route: total destination weight = 0",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a, subset: v1}, weight: 40}, {destination: {host: a, subset: v2}, weight: 60}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}, weight: -5}]}]",
        "spec.http[0].route[0].weight: weight -5 < 0",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}, weight: 100}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\ntcp: [{route: [{destination: {host: a}, weight: 0}, {destination: {host: b}, weight: 0}]}]",
        "spec.tcp[0].route: total destination weight = 0",
        "hosts: [a]\ntcp: [{route: [{destination: {host: a}, weight: 30}, {destination: {host: b}, weight: 70}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{route: [{weight: 100}]}]",
        "spec.http[0].route[0].destination: destination is required",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{route: [{destination: {host: \"*\"}}]}]",
        "spec.http[0].route[0].destination.host: invalid destination host *",
        "hosts: [a]\nhttp: [{route: [{destination: {host: \"*.example.com\"}}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a, subset: V_1}}]}]",
        "spec.http[0].route[0].destination.subset: subset name is invalid: V_1",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a, subset: v-1}}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a, port: {number: 70000}}}]}]",
        "destination.port.number: port number 70000 must be in the range 1..65535",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a, port: {number: 9080}}}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{match: [{uri: {regex: \"a(b\"}}], route: [{destination: {host: a}}]}]",
        "spec.http[0].match[0].uri: \"uri\": \"a(b\" is not a valid regex",
        "hosts: [a]\nhttp: [{match: [{uri: {regex: \"a(b)\"}}], route: [{destination: {host: a}}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{match: [{headers: {x-user: {regex: \"[\"}}}], route: [{destination: {host: a}}]}]",
        "spec.http[0].match[0].headers.x-user",
        "hosts: [a]\nhttp: [{match: [{headers: {x-user: {prefix: adm}}}], route: [{destination: {host: a}}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{match: [{port: 0, sourceLabels: {\"bad key!\": x}}], route: [{destination: {host: a}}]}]",
        "spec.http[0].match[0].sourceLabels: invalid tag key",
        "hosts: [a]\nhttp: [{match: [{sourceLabels: {app: x}}], route: [{destination: {host: a}}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], timeout: 500us}]",
        "spec.http[0].timeout: duration must be greater than 1ms",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], timeout: 1.5s}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], retries: {attempts: -1}}]",
        "spec.http[0].retries.attempts: attempts cannot be negative",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], retries: {attempts: 0}}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], retries: {attempts: 2, retryOn: \"5xx,sometimes\"}}]",
        "spec.http[0].retries.retryOn: \"sometimes\" is not a valid retryOn policy",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], retries: {attempts: 2, retryOn: \"5xx,503,cancelled\"}}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], fault: {abort: {httpStatus: 99}}}]",
        "spec.http[0].fault.abort.httpStatus: HTTP status 99 is not in range 200-599",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], fault: {abort: {httpStatus: 503}}}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], fault: {abort: {grpcStatus: UNAVAILABLE, httpStatus: 503}}}]",
        "abort must specify exactly one of httpStatus, grpcStatus or http2Error",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], fault: {abort: {grpcStatus: UNAVAILABLE}}}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], fault: {delay: {percentage: {value: 150}, fixedDelay: 1s}}}]",
        "spec.http[0].fault.delay.percentage: percentage 150 is neither 0.0, nor in range [0.0001, 100.0]",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], fault: {delay: {percentage: {value: 0.1}, fixedDelay: 1s}}}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], fault: {delay: {percentage: {value: 5}, exponentialDelay: 2s}}}]",
        "spec.http[0].fault.delay.exponentialDelay: exponentialDelay not supported yet",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], fault: {delay: {percentage: {value: 5}, fixedDelay: 2s}}}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], fault: {}}]",
        "spec.http[0].fault: HTTP fault injection must have an abort and/or a delay",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], mirror: {host: m}, mirrors: [{destination: {host: m}}]}]",
        "HTTP route cannot contain both mirror and mirrors",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], mirrors: [{destination: {host: m}, percentage: {value: 5}}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], rewrite: {uri: /a, uriRegexRewrite: {match: x, rewrite: /y}}}]",
        "spec.http[0].rewrite: rewrite may only contain one of URI or UriRegexRewrite",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], rewrite: {uriRegexRewrite: {match: \"^/x(.*)\", rewrite: \"/y\\\\1\"}}}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], corsPolicy: {allowMethods: [FETCH]}}]",
        "spec.http[0].corsPolicy.allowMethods[0]: \"FETCH\" is not a supported HTTP method",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], corsPolicy: {allowMethods: [GET], maxAge: 24h}}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}, headers: {request: {set: {\"\": x}}}}]}]",
        "spec.http[0].route[0].headers.request.set.: header name cannot be empty",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}, headers: {request: {set: {x-a: x}}}}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}}], delegate: {name: d}}]",
        "spec.http[0]: root HTTP route  must not specify route",
        "hosts: [a]\ngateways: [gw]\nhttp: [{delegate: {name: d, namespace: ns}}]",
    ),
    (
        "VirtualService",
        "hosts: [\"*.bookinfo.com\"]\ngateways: [gw]\ntls: [{match: [{sniHosts: [login.other.com]}], route: [{destination: {host: a}}]}]",
        "spec.tls[0].match[0].sniHosts[0]: SNI host \"login.other.com\" is not a compatible subset",
        "hosts: [\"*.bookinfo.com\"]\ngateways: [gw]\ntls: [{match: [{sniHosts: [login.bookinfo.com]}], route: [{destination: {host: a}}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\ntls: [{route: [{destination: {host: a}}]}]",
        "spec.tls[0].match: TLS route must have at least one match condition",
        "hosts: [a]\ntls: [{match: [{sniHosts: [a]}], route: [{destination: {host: a}}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\ntcp: [{match: [{destinationSubnets: [10.0.0.0/40]}], route: [{destination: {host: a}}]}]",
        "spec.tcp[0].match[0].destinationSubnets[0]: 10.0.0.0/40 is not a valid CIDR block",
        "hosts: [a]\ntcp: [{match: [{destinationSubnets: [10.0.0.0/8]}], route: [{destination: {host: a}}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\ntcp: [{match: [{port: 27017}]}]",
        "spec.tcp[0].route: TCP route is required",
        "hosts: [a]\ntcp: [{match: [{port: 27017}], route: [{destination: {host: a}}]}]",
    ),
    (
        "VirtualService",
        "hosts: [a]\nexportTo: [\"*\", other]\nhttp: [{route: [{destination: {host: a}}]}]",
        "spec.exportTo: cannot have both public (*) and non-public exportTo values",
        "hosts: [a]\nexportTo: [\".\", other]\nhttp: [{route: [{destination: {host: a}}]}]",
    ),
    // ---- DestinationRule
    (
        "DestinationRule",
        "host: \"bad host\"",
        "spec.host: domain name \"bad host\" invalid",
        "host: reviews.prod.svc.cluster.local",
    ),
    (
        "DestinationRule",
        "host: a\ntrafficPolicy: {}",
        "spec.trafficPolicy: traffic policy must have at least one field",
        "host: a\ntrafficPolicy: {loadBalancer: {simple: LEAST_REQUEST}}",
    ),
    (
        "DestinationRule",
        "host: a\nsubsets: [{labels: {v: \"1\"}}]",
        "spec.subsets[0].name: subset name cannot be empty",
        "host: a\nsubsets: [{name: v1, labels: {v: \"1\"}}]",
    ),
    (
        "DestinationRule",
        "host: a\nsubsets: [{name: v1}, {name: v1}]",
        "spec.subsets[1].name: duplicate subset names: v1",
        "host: a\nsubsets: [{name: v1}, {name: v2}]",
    ),
    (
        "DestinationRule",
        "host: a\ntrafficPolicy: {outlierDetection: {maxEjectionPercent: 101}}",
        "spec.trafficPolicy.outlierDetection.maxEjectionPercent: percentage 101 is not in range 0..100",
        "host: a\ntrafficPolicy: {outlierDetection: {maxEjectionPercent: 100, interval: 10s}}",
    ),
    (
        "DestinationRule",
        "host: a\ntrafficPolicy: {connectionPool: {}}",
        "spec.trafficPolicy.connectionPool: connection pool must have at least one field",
        "host: a\ntrafficPolicy: {connectionPool: {tcp: {maxConnections: 1}}}",
    ),
    (
        "DestinationRule",
        "host: a\ntrafficPolicy: {connectionPool: {http: {maxRetries: -2}}}",
        "spec.trafficPolicy.connectionPool.http.maxRetries: max retries must be non-negative",
        "host: a\ntrafficPolicy: {connectionPool: {http: {maxRetries: 2}}}",
    ),
    (
        "DestinationRule",
        "host: a\ntrafficPolicy: {connectionPool: {tcp: {connectTimeout: 0s}}}",
        "spec.trafficPolicy.connectionPool.tcp.connectTimeout: duration must be greater than 1ms",
        "host: a\ntrafficPolicy: {connectionPool: {tcp: {connectTimeout: 30ms}}}",
    ),
    (
        "DestinationRule",
        "host: a\ntrafficPolicy: {loadBalancer: {simple: RANDOM, consistentHash: {useSourceIp: true}}}",
        "only one of simple or consistentHash may be set",
        "host: a\ntrafficPolicy: {loadBalancer: {consistentHash: {useSourceIp: true}}}",
    ),
    (
        "DestinationRule",
        "host: a\ntrafficPolicy: {loadBalancer: {consistentHash: {httpCookie: {ttl: 10s}}}}",
        "spec.trafficPolicy.loadBalancer.consistentHash.httpCookie.name: name required for HttpCookie",
        "host: a\ntrafficPolicy: {loadBalancer: {consistentHash: {httpCookie: {name: user, ttl: 10s}}}}",
    ),
    (
        "DestinationRule",
        "host: a\ntrafficPolicy: {loadBalancer: {consistentHash: {httpHeaderName: x, useSourceIp: true}}}",
        "only one of httpHeaderName, httpCookie, useSourceIp or httpQueryParameterName may be set",
        "host: a\ntrafficPolicy: {loadBalancer: {consistentHash: {httpHeaderName: x, ringHash: {minimumRingSize: 1024}}}}",
    ),
    (
        "DestinationRule",
        "host: a\ntrafficPolicy: {loadBalancer: {localityLbSetting: {distribute: [{from: us-west/*, to: {us-west/*: 80, us-east/*: 10}}]}}}",
        "localityLbSetting: total locality weight 90 != 100",
        "host: a\ntrafficPolicy: {loadBalancer: {localityLbSetting: {distribute: [{from: us-west/*, to: {us-west/*: 80, us-east/*: 20}}]}}}",
    ),
    (
        "DestinationRule",
        "host: a\ntrafficPolicy: {loadBalancer: {localityLbSetting: {failover: [{from: us-east, to: us-east}]}}}",
        "locality lb failover settings must specify different regions",
        "host: a\ntrafficPolicy: {loadBalancer: {localityLbSetting: {failover: [{from: us-east, to: eu-west}]}}}",
    ),
    (
        "DestinationRule",
        "host: a\ntrafficPolicy: {tls: {mode: SIMPLE, insecureSkipVerify: true, caCertificates: /etc/ca.pem}}",
        "spec.trafficPolicy.tls: cannot specify CaCertificates or CredentialName or SubjectAltNames when InsecureSkipVerify is set true",
        "host: a\ntrafficPolicy: {tls: {mode: ISTIO_MUTUAL, caCertificates: /etc/ca.pem}}",
    ),
    (
        "DestinationRule",
        "host: a\ntrafficPolicy: {tls: {mode: MUTUAL, privateKey: /k.pem}}",
        "spec.trafficPolicy.tls.clientCertificate: client certificate required for mutual tls",
        "host: a\ntrafficPolicy: {tls: {mode: MUTUAL, credentialName: client-credential}}",
    ),
    (
        "DestinationRule",
        "host: a\ntrafficPolicy: {portLevelSettings: [{loadBalancer: {simple: RANDOM}}]}",
        "spec.trafficPolicy.portLevelSettings[0].port: portTrafficPolicy must have valid port",
        "host: a\ntrafficPolicy: {portLevelSettings: [{port: {number: 80}, loadBalancer: {simple: RANDOM}}]}",
    ),
    (
        "DestinationRule",
        "host: a\nexportTo: [ns, \".\"]",
        "spec.exportTo: duplicate entries in exportTo: . and current namespace ns",
        "host: a\nexportTo: [\".\", other]",
    ),
    (
        "DestinationRule",
        "host: a\nworkloadSelector: {matchLabels: {app: \"*\"}}",
        "spec.workloadSelector: wildcard is not supported in selector",
        "host: a\nworkloadSelector: {matchLabels: {app: web}}",
    ),
    // ---- Gateway
    (
        "Gateway",
        "servers: []",
        "spec.servers: gateway must have at least one server",
        "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [\"*\"]}]",
    ),
    (
        "Gateway",
        "servers: [{port: {number: 80, name: http, protocol: HTTP}}]",
        "spec.servers[0].hosts: server config must contain at least one host",
        "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [\"ns/*.example.com\"]}]",
    ),
    (
        "Gateway",
        "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [\"Bad_NS/a.com\"]}]",
        "spec.servers[0].hosts[0]: invalid namespace value \"Bad_NS\" in gateway",
        "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [\"./a.com\"]}]",
    ),
    (
        "Gateway",
        "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [shortname]}]",
        "spec.servers[0].hosts[0]: short names (non FQDN) are not allowed",
        "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [10.0.0.1, long.name.com]}]",
    ),
    (
        "Gateway",
        "servers: [{port: {number: 80, name: http, protocol: SMTP}, hosts: [\"*\"]}]",
        "spec.servers[0].port.protocol: invalid protocol \"SMTP\"",
        "servers: [{port: {number: 80, name: http, protocol: http2}, hosts: [\"*\"]}]",
    ),
    (
        "Gateway",
        "servers: [{port: {number: 80, protocol: HTTP}, hosts: [\"*\"]}]",
        "spec.servers[0].port.name: port name must be set",
        "servers: [{port: {number: 80, name: web, protocol: HTTP}, hosts: [\"*\"]}]",
    ),
    (
        "Gateway",
        "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"]}]",
        "spec.servers[0]: server must have TLS settings for HTTPS/TLS protocols",
        "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"], tls: {mode: SIMPLE, credentialName: cert}}]",
    ),
    (
        "Gateway",
        "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [\"*\"], tls: {mode: SIMPLE, serverCertificate: /c, privateKey: /k}}]",
        "spec.servers[0]: server cannot have TLS settings for plain text HTTP ports",
        "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [\"*\"], tls: {httpsRedirect: true}}]",
    ),
    (
        "Gateway",
        "servers: [{port: {number: 31400, name: tcp, protocol: TCP}, hosts: [\"*\"], tls: {mode: PASSTHROUGH}}]",
        "server cannot have TLS settings for non HTTPS/TLS ports",
        "servers: [{port: {number: 31400, name: tcp, protocol: TCP}, hosts: [\"*\"]}]",
    ),
    (
        "Gateway",
        "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"], tls: {mode: SIMPLE}}]",
        "spec.servers[0].tls: SIMPLE TLS requires a server certificate",
        "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"], tls: {mode: SIMPLE, serverCertificate: /c, privateKey: /k}}]",
    ),
    (
        "Gateway",
        "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"], tls: {mode: MUTUAL, serverCertificate: /c, privateKey: /k}}]",
        "MUTUAL TLS requires a client CA bundle",
        "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"], tls: {mode: MUTUAL, serverCertificate: /c, privateKey: /k, caCertificates: /ca}}]",
    ),
    (
        "Gateway",
        "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"], tls: {mode: ISTIO_MUTUAL, privateKey: /k}}]",
        "ISTIO_MUTUAL TLS cannot have associated private key",
        "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [\"*\"], tls: {mode: ISTIO_MUTUAL}}]",
    ),
    (
        "Gateway",
        "servers: [{port: {number: 80, name: web, protocol: HTTP}, hosts: [\"*\"]}, {port: {number: 81, name: web, protocol: HTTP}, hosts: [\"*\"]}]",
        "spec.servers[1].port.name: port names in servers must be unique: duplicate name web",
        "servers: [{port: {number: 80, name: web, protocol: HTTP}, hosts: [\"*\"]}, {port: {number: 81, name: web2, protocol: HTTP}, hosts: [\"*\"]}]",
    ),
    (
        "Gateway",
        "servers: [{port: {number: 99999, name: web, protocol: HTTP}, hosts: [\"*\"]}]",
        "spec.servers[0].port.number: port number 99999 must be in the range 1..65535",
        "servers: [{port: {number: 8080, name: web, protocol: HTTP}, hosts: [\"*\"]}]",
    ),
    // ---- ServiceEntry
    (
        "ServiceEntry",
        "ports: [{number: 80, name: http, protocol: HTTP}]",
        "spec.hosts: service entry must have at least one host",
        "hosts: [a.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: DNS",
    ),
    (
        "ServiceEntry",
        "hosts: [\"*\"]\nports: [{number: 80, name: http, protocol: HTTP}]",
        "spec.hosts[0]: invalid host *",
        "hosts: [\"*.a.com\"]\nports: [{number: 80, name: http, protocol: HTTP}]",
    ),
    (
        "ServiceEntry",
        "hosts: [a.com]\naddresses: [300.1.1.1]\nports: [{number: 80, name: http, protocol: HTTP}]",
        "spec.addresses[0]: 300.1.1.1 is not a valid IP",
        "hosts: [a.com]\naddresses: [10.1.1.1, 10.2.0.0/16]\nports: [{number: 80, name: http, protocol: HTTP}]",
    ),
    (
        "ServiceEntry",
        "hosts: [\"*.a.com\"]\naddresses: [10.0.0.1]\nports: [{number: 443, name: tls, protocol: TLS}]\nresolution: DYNAMIC_DNS",
        "spec.addresses: addresses cannot be set for resolution type DYNAMIC_DNS",
        "hosts: [a.com]\nworkloadSelector: {labels: {app: vm}}",
    ),
    (
        "ServiceEntry",
        "hosts: [a.com]\nports: [{number: 80, name: http, protocol: HTTP}, {number: 80, name: http2, protocol: HTTP}]",
        "spec.ports[1].number: service entry port 80 already defined",
        "hosts: [a.com]\nports: [{number: 80, name: http, protocol: HTTP}, {number: 81, name: http2, protocol: HTTP}]",
    ),
    (
        "ServiceEntry",
        "hosts: [a.com]\nports: [{number: 80, name: http, protocol: HTTP}, {number: 81, name: http, protocol: HTTP}]",
        "spec.ports[1].name: service entry port name \"http\" already defined",
        "hosts: [a.com]\nports: [{number: 80, name: http, protocol: HTTP}, {number: 81, name: http-alt, protocol: HTTP}]",
    ),
    (
        "ServiceEntry",
        "hosts: [a.com]\nports: [{number: 80, name: \"bad name\", protocol: HTTP}]",
        "spec.ports[0].name: invalid port name: bad name",
        "hosts: [a.com]\nports: [{number: 80, name: http-web, protocol: HTTP}]",
    ),
    (
        "ServiceEntry",
        "hosts: [a.com]\nports: [{number: 80, name: p, protocol: CARRIER-PIGEON}]",
        "spec.ports[0].protocol: unsupported protocol: CARRIER-PIGEON",
        "hosts: [a.com]\nports: [{number: 80, name: p, protocol: grpc-web}]",
    ),
    (
        "ServiceEntry",
        "hosts: [a.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: NONE\nendpoints: [{address: 1.1.1.1}]",
        "spec.endpoints: no endpoints should be provided for resolution type none",
        "hosts: [a.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: NONE",
    ),
    (
        "ServiceEntry",
        "hosts: [a.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: STATIC\nendpoints: [{address: not.an.ip}]",
        "spec.endpoints[0].address: endpoint address \"not.an.ip\" is not a valid IP address",
        "hosts: [a.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: STATIC\nendpoints: [{address: 1.1.1.1}, {address: \"unix:///var/run/a.sock\"}]",
    ),
    (
        "ServiceEntry",
        "hosts: [\"*.a.com\"]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: DNS",
        "hosts must be FQDN or contain only prefix wildcards if no endpoints are provided for resolution mode DNS",
        "hosts: [\"*.a.com\"]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: DNS\nendpoints: [{address: proxy.a.com}]",
    ),
    (
        "ServiceEntry",
        "hosts: [a.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: DNS_ROUND_ROBIN\nendpoints: [{address: x.a.com}, {address: y.a.com}]",
        "there must only be 0 or 1 endpoint for resolution mode DNS_ROUND_ROBIN",
        "hosts: [a.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: DNS_ROUND_ROBIN\nendpoints: [{address: x.a.com}]",
    ),
    (
        "ServiceEntry",
        "hosts: [a.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: STATIC\nworkloadSelector: {labels: {app: a}}\nendpoints: [{address: 1.1.1.1}]",
        "only one of WorkloadSelector or Endpoints is allowed in Service Entry",
        "hosts: [a.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: STATIC\nworkloadSelector: {labels: {app: a}}",
    ),
    (
        "ServiceEntry",
        "hosts: [a.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: STATIC\nendpoints: [{address: 1.1.1.1, ports: {grpc: 9000}}]",
        "spec.endpoints[0].ports.grpc: endpoint port 9000 is not defined by the service entry",
        "hosts: [a.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nresolution: STATIC\nendpoints: [{address: 1.1.1.1, ports: {http: 9000}}]",
    ),
    (
        "ServiceEntry",
        "hosts: [a.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nexportTo: [\"~\", ns2]",
        "cannot export service entry to no one (~) and someone",
        "hosts: [a.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nexportTo: [\"~\"]",
    ),
    // ---- WorkloadEntry / WorkloadGroup
    (
        "WorkloadEntry",
        "labels: {app: a}",
        "spec.address: address is required",
        "address: 10.0.0.1\nlabels: {app: a}",
    ),
    (
        "WorkloadEntry",
        "address: \"bad address!\"",
        "spec.address: endpoint address \"bad address!\" is not a valid FQDN or an IP address",
        "address: vm1.example.com",
    ),
    (
        "WorkloadEntry",
        "address: 10.0.0.1\nports: {http: 0}",
        "spec.ports.http: port number 0 must be in the range 1..65535",
        "address: 10.0.0.1\nports: {http: 8080}",
    ),
    (
        "WorkloadEntry",
        "address: 10.0.0.1\nports: {http_1: 80}",
        "spec.ports.http_1: invalid port name: http_1",
        "address: 10.0.0.1\nports: {http: 80}\nserviceAccount: Any_Form_Istiod_Accepts",
    ),
    (
        "WorkloadGroup",
        "probe: {tcpSocket: {port: 80}}",
        "spec.template: template is required",
        "template: {serviceAccount: sa}\nprobe: {tcpSocket: {port: 80}}",
    ),
    (
        "WorkloadGroup",
        "metadata: {labels: {\"bad key!\": a}}\ntemplate: {}",
        "spec.metadata.labels: invalid labels",
        "template: {address: 1.1.1.1, ports: {http: 80}}",
    ),
    (
        "WorkloadGroup",
        "template: {}\nprobe: {httpGet: {port: 80}, tcpSocket: {port: 80}}",
        "spec.probe: probe must specify exactly one of httpGet, tcpSocket or exec",
        "template: {}\nprobe: {exec: {command: [/bin/true]}}",
    ),
    // ---- Sidecar
    (
        "Sidecar",
        "workloadSelector: {labels: {app: a}}",
        "spec: sidecar: empty configuration provided",
        "egress: [{hosts: [\"./*\"]}]",
    ),
    (
        "Sidecar",
        "egress: [{hosts: [\"*\"]}]",
        "spec.egress[0].hosts[0]: host must be of form namespace/dnsName",
        "egress: [{hosts: [\"*/*\"]}]",
    ),
    (
        "Sidecar",
        "egress: [{hosts: [\"~/*\", \"ns/short\"]}]",
        "spec.egress[0].hosts[1]: short names (non FQDN) are not allowed",
        "egress: [{hosts: [\"~/*\", \"ns/a.b.svc.cluster.local\"]}]",
    ),
    (
        "Sidecar",
        "egress: [{hosts: [\"./*\"]}, {port: {number: 80, protocol: HTTP, name: h}, hosts: [\"./*\"]}]",
        "sidecar: the egress listener with empty port should be the last listener in the list",
        "egress: [{port: {number: 80, protocol: HTTP, name: h}, hosts: [\"./*\"]}, {hosts: [\"./*\"]}]",
    ),
    (
        "Sidecar",
        "egress: [{port: {number: 80, protocol: HTTP, name: a}, hosts: [\"./*\"]}, {port: {number: 80, protocol: HTTP, name: b}, hosts: [\"./*\"]}]",
        "sidecar: ports on IP bound listeners must be unique",
        "egress: [{port: {number: 80, protocol: HTTP, name: a}, hosts: [\"./*\"]}, {port: {number: 81, protocol: HTTP, name: b}, hosts: [\"./*\"]}]",
    ),
    (
        "Sidecar",
        "egress: [{port: {number: 0, protocol: HTTP, name: u}, hosts: [\"./*\"]}]",
        "sidecar: ports with 0 value must have a unix domain socket bind address",
        "egress: [{port: {number: 0, protocol: HTTP, name: u}, bind: \"unix:///var/run/a.sock\", hosts: [\"./*\"]}]",
    ),
    (
        "Sidecar",
        "ingress: [{port: {number: 9080, protocol: HTTP, name: h}, defaultEndpoint: \"1.2.3.4:80\"}]\negress: [{hosts: [\"./*\"]}]",
        "spec.ingress[0].defaultEndpoint: sidecar: defaultEndpoint must be of form",
        "ingress: [{port: {number: 9080, protocol: HTTP, name: h}, defaultEndpoint: \"127.0.0.1:8080\"}]\negress: [{hosts: [\"./*\"]}]",
    ),
    (
        "Sidecar",
        "ingress: [{defaultEndpoint: \"127.0.0.1:8080\"}]",
        "spec.ingress[0].port: sidecar: port is required for ingress listeners",
        "ingress: [{port: {number: 9080, protocol: HTTP, name: h}}]",
    ),
    (
        "Sidecar",
        "egress: [{hosts: [\"./*\"]}]\noutboundTrafficPolicy: {mode: REGISTRY_ONLY, egressProxy: {host: proxy.ns.svc.cluster.local, port: {number: 80}}}",
        "sidecar: egress_proxy must be set only with ALLOW_ANY outbound_traffic_policy mode",
        "egress: [{hosts: [\"./*\"]}]\noutboundTrafficPolicy: {mode: ALLOW_ANY, egressProxy: {host: proxy.ns.svc.cluster.local, port: {number: 80}}}",
    ),
    // ---- EnvoyFilter
    (
        "EnvoyFilter",
        "configPatches: [{patch: {operation: ADD, value: {}}}]",
        "spec.configPatches[0].applyTo: Envoy filter: missing applyTo",
        "configPatches: [{applyTo: CLUSTER, patch: {operation: ADD, value: {name: c}}}]",
    ),
    (
        "EnvoyFilter",
        "configPatches: [{applyTo: CLUSTER}]",
        "spec.configPatches[0].patch: Envoy filter: missing patch",
        "configPatches: [{applyTo: CLUSTER, patch: {operation: REMOVE}}]",
    ),
    (
        "EnvoyFilter",
        "configPatches: [{applyTo: CLUSTER, patch: {value: {a: 1}}}]",
        "Envoy filter: missing patch operation",
        "configPatches: [{applyTo: CLUSTER, patch: {operation: MERGE, value: {a: 1}}}]",
    ),
    (
        "EnvoyFilter",
        "configPatches: [{applyTo: CLUSTER, patch: {operation: MERGE}}]",
        "Envoy filter: missing patch value for non-remove operation",
        "configPatches: [{applyTo: CLUSTER, patch: {operation: MERGE, value: {connect_timeout: 1s}}}]",
    ),
    (
        "EnvoyFilter",
        "configPatches: [{applyTo: CLUSTER, match: {proxy: {proxyVersion: \"1.(\"}}, patch: {operation: REMOVE}}]",
        "Envoy filter: invalid regex for proxy version",
        "configPatches: [{applyTo: CLUSTER, match: {proxy: {proxyVersion: \"^1\\\\.2.*\"}}, patch: {operation: REMOVE}}]",
    ),
    (
        "EnvoyFilter",
        "configPatches: [{applyTo: HTTP_FILTER, match: {cluster: {service: a}}, patch: {operation: REMOVE}}]",
        "Envoy filter: applyTo for listener class objects cannot have non listener match",
        "configPatches: [{applyTo: HTTP_FILTER, match: {listener: {portNumber: 80}}, patch: {operation: REMOVE}}]",
    ),
    (
        "EnvoyFilter",
        "configPatches: [{applyTo: NETWORK_FILTER, match: {listener: {filterChain: {filter: {name: x, subFilter: {name: envoy.filters.http.router}}}}}, patch: {operation: REMOVE}}]",
        "Envoy filter: subfilter match can be used with applyTo HTTP_FILTER only",
        "configPatches: [{applyTo: NETWORK_FILTER, match: {listener: {filterChain: {filter: {name: x}}}}, patch: {operation: REMOVE}}]",
    ),
    (
        "EnvoyFilter",
        "configPatches: [{applyTo: HTTP_ROUTE, match: {listener: {}}, patch: {operation: REMOVE}}]",
        "applyTo for http route class objects cannot have non route configuration match",
        "configPatches: [{applyTo: HTTP_ROUTE, match: {routeConfiguration: {vhost: {name: a}}}, patch: {operation: REMOVE}}]",
    ),
    (
        "EnvoyFilter",
        "configPatches: [{applyTo: CLUSTER, match: {routeConfiguration: {}}, patch: {operation: REMOVE}}]",
        "applyTo for cluster class objects cannot have non cluster match",
        "configPatches: [{applyTo: CLUSTER, match: {cluster: {name: outbound|80||a}}, patch: {operation: REMOVE}}]",
    ),
    // ---- PeerAuthentication
    (
        "PeerAuthentication",
        "mtls: {mode: STRICT}\nportLevelMtls: {8080: {mode: DISABLE}}",
        "spec.portLevelMtls: mesh/namespace peer authentication cannot have port level mTLS",
        "selector: {matchLabels: {app: a}}\nmtls: {mode: STRICT}\nportLevelMtls: {8080: {mode: DISABLE}}",
    ),
    (
        "PeerAuthentication",
        "selector: {matchLabels: {app: a}}\nportLevelMtls: {0: {mode: DISABLE}}",
        "spec.portLevelMtls.0: port must be in range 1..65535",
        "selector: {matchLabels: {app: a}}\nportLevelMtls: {80: {mode: DISABLE}}",
    ),
    (
        "PeerAuthentication",
        "selector: {matchLabels: {app: a}}\nportLevelMtls: {}",
        "port level mTLS, if defined, must have at least one element",
        "selector: {matchLabels: {app: a}}",
    ),
    (
        "PeerAuthentication",
        "selector: {matchLabels: {\"\": a}}",
        "spec.selector: empty key is not supported in selector",
        "selector: {matchLabels: {app: a}}",
    ),
    // ---- AuthorizationPolicy
    (
        "AuthorizationPolicy",
        "action: DENY",
        "spec.rules: DENY action without `rules` is meaningless",
        "action: DENY\nrules: [{from: [{source: {namespaces: [bad]}}]}]",
    ),
    (
        "AuthorizationPolicy",
        "rules: [{from: []}]",
        "spec.rules[0].from: `from` must not be empty",
        "rules: [{from: [{source: {principals: [\"*\"]}}]}]",
    ),
    (
        "AuthorizationPolicy",
        "rules: [{from: [{}]}]",
        "spec.rules[0].from[0].source: `from.source` must not be nil",
        "rules: [{from: [{source: {notNamespaces: [x]}}]}]",
    ),
    (
        "AuthorizationPolicy",
        "rules: [{from: [{source: {}}]}]",
        "spec.rules[0].from[0].source: `from.source` must not be empty",
        "rules: [{from: [{source: {requestPrincipals: [\"*\"]}}]}]",
    ),
    (
        "AuthorizationPolicy",
        "rules: [{from: [{source: {ipBlocks: [1.2.3.4/99]}}]}]",
        "spec.rules[0].from[0].source.ipBlocks[0]: 1.2.3.4/99 is not a valid CIDR block",
        "rules: [{from: [{source: {ipBlocks: [1.2.3.0/24], remoteIpBlocks: [2001:db8::1]}}]}]",
    ),
    (
        "AuthorizationPolicy",
        "rules: [{from: [{source: {principals: [\"\"]}}]}]",
        "empty value is found for principals",
        "rules: [{from: [{source: {principals: [a]}}]}]",
    ),
    (
        "AuthorizationPolicy",
        "rules: [{to: [{operation: {}}]}]",
        "spec.rules[0].to[0].operation: `to.operation` must not be empty",
        "rules: [{to: [{operation: {notPaths: [/x]}}]}]",
    ),
    (
        "AuthorizationPolicy",
        "rules: [{to: [{operation: {ports: [\"http\"]}}]}]",
        "spec.rules[0].to[0].operation.ports[0]: bad port (http)",
        "rules: [{to: [{operation: {ports: [\"8080\"]}}]}]",
    ),
    (
        "AuthorizationPolicy",
        "rules: [{when: [{key: request.color, values: [blue]}]}]",
        "spec.rules[0].when[0].key: unknown attribute: request.color",
        "rules: [{when: [{key: \"request.headers[x-color]\", values: [blue]}]}]",
    ),
    (
        "AuthorizationPolicy",
        "rules: [{when: [{key: source.namespace}]}]",
        "at least one of `values` or `notValues` must be set for key source.namespace",
        "rules: [{when: [{key: source.namespace, notValues: [evil]}]}]",
    ),
    (
        "AuthorizationPolicy",
        "rules: [{when: [{key: \"request.headers[x-team]\", notValues: [\"\"]}]}]",
        "spec.rules[0].when[0].notValues: empty value not allowed, found in request.headers[x-team]",
        "rules: [{when: [{key: \"request.headers[x-team]\", notValues: [blue]}]}]",
    ),
    (
        "AuthorizationPolicy",
        "rules: [{when: [{key: destination.port, values: [\"99999\"]}]}]",
        "spec.rules[0].when[0].values: port number 99999",
        "rules: [{when: [{key: destination.port, values: [\"443\"]}]}]",
    ),
    (
        "AuthorizationPolicy",
        "action: CUSTOM\nrules: [{to: [{operation: {paths: [/x]}}]}]",
        "spec.provider.name: `provider.name` must not be empty",
        "action: CUSTOM\nprovider: {name: authz}\nrules: [{to: [{operation: {paths: [/x]}}]}]",
    ),
    (
        "AuthorizationPolicy",
        "provider: {name: authz}",
        "spec.provider: `provider` must not be with non CUSTOM action",
        "action: AUDIT\nrules: [{}]",
    ),
    (
        "AuthorizationPolicy",
        "selector: {matchLabels: {app: a}}\ntargetRef: {kind: Gateway, name: gw}",
        "spec: only one of targetRefs or workloadSelector can be set",
        "targetRef: {kind: Gateway, group: gateway.networking.k8s.io, name: gw}",
    ),
    // ---- RequestAuthentication
    (
        "RequestAuthentication",
        "jwtRules: [{audiences: [a]}]",
        "spec.jwtRules[0].issuer: issuer or jwksUri must be non-empty string",
        "jwtRules: [{jwksUri: \"https://a/jwks\"}]",
    ),
    (
        "RequestAuthentication",
        "jwtRules: [{issuer: a, jwksUri: \"ftp://x\"}]",
        "spec.jwtRules[0].jwksUri: jwks URI \"ftp://x\" is not a valid http(s) URL",
        "jwtRules: [{issuer: a, jwksUri: \"http://x:8080/keys\"}]",
    ),
    (
        "RequestAuthentication",
        "jwtRules: [{issuer: a, audiences: [\"\"]}]",
        "audience must be non-empty string",
        "jwtRules: [{issuer: a, audiences: [b]}]",
    ),
    (
        "RequestAuthentication",
        "jwtRules: [{issuer: a, fromHeaders: [{prefix: x}]}]",
        "location header name must be non-empty string",
        "jwtRules: [{issuer: a, fromHeaders: [{name: x-jwt}]}]",
    ),
    (
        "RequestAuthentication",
        "jwtRules: [{issuer: a, fromParams: [\"\"]}]",
        "location query must be non-empty string",
        "jwtRules: [{issuer: a, fromParams: [token]}]",
    ),
    (
        "RequestAuthentication",
        "jwtRules: [{issuer: a, jwks: \"{not json\"}]",
        "spec.jwtRules[0].jwks: jwks parse error",
        "jwtRules: [{issuer: a, jwks: \"{\\\"keys\\\": []}\"}]",
    ),
    // ---- Telemetry
    (
        "Telemetry",
        "tracing: [{randomSamplingPercentage: 200}]",
        "spec.tracing[0].randomSamplingPercentage: randomSamplingPercentage must be in range",
        "tracing: [{randomSamplingPercentage: 50}]",
    ),
    (
        "Telemetry",
        "accessLogging: [{filter: {expression: \"response.code >=\"}}]",
        "spec.accessLogging[0].filter.expression: must be a valid CEL expression",
        "accessLogging: [{filter: {expression: \"response.code >= 400 && !has(request.headers.x)\"}}]",
    ),
    (
        "Telemetry",
        "accessLogging: [{filter: {}}]",
        "spec.accessLogging[0].filter.expression: must be a valid CEL expression",
        "accessLogging: [{providers: [{name: envoy}]}]",
    ),
    (
        "Telemetry",
        "accessLogging: [{providers: [{name: \"\"}]}]",
        "spec.accessLogging[0].providers: providers.name may not be empty",
        "accessLogging: [{providers: [{name: envoy}]}]",
    ),
    (
        "Telemetry",
        "metrics: [{overrides: [{tagOverrides: {a: {operation: UPSERT}}}]}]",
        "spec.metrics[0].overrides[0].tagOverrides.a: tagOverrides.value must be set when operation is UPSERT",
        "metrics: [{overrides: [{tagOverrides: {a: {operation: UPSERT, value: \"'x'\"}}}]}]",
    ),
    (
        "Telemetry",
        "metrics: [{overrides: [{tagOverrides: {a: {operation: REMOVE, value: x}}}]}]",
        "spec.metrics[0].overrides[0].tagOverrides.a: tagOverrides.value may only be set when operation is UPSERT",
        "metrics: [{reportingInterval: 0s, overrides: [{tagOverrides: {a: {operation: REMOVE}}}]}]",
    ),
    (
        "Telemetry",
        "tracing: [{customTags: {t: {literal: {}}}}]",
        "spec.tracing[0].customTags.t: custom tag must have a name and a value source",
        "tracing: [{customTags: {t: {header: {name: x-id}}}}]",
    ),
];

#[test]
fn every_rule_rejects_its_failing_case_and_accepts_its_twin() {
    let mut problems = Vec::new();
    for (i, (kind, bad, want, good)) in CASES.iter().enumerate() {
        match check(kind, "obj", bad) {
            Ok(()) => problems.push(format!(
                "case {i} ({kind}): accepted invalid spec, wanted {want:?}\n{bad}"
            )),
            Err(errs) => {
                if !errs.iter().any(|e| e.contains(want)) {
                    problems.push(format!("case {i} ({kind}): wanted {want:?}, got {errs:#?}"));
                }
                if !errs
                    .iter()
                    .all(|e| e.starts_with(&format!("{kind} ns/obj: ")))
                {
                    problems.push(format!(
                        "case {i} ({kind}): errors do not name the object: {errs:?}"
                    ));
                }
            }
        }
        if let Err(errs) = check(kind, "obj", good) {
            problems.push(format!(
                "case {i} ({kind}): rejected valid spec: {errs:#?}\n{good}"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn object_names_follow_kubernetes_and_istio_rules() {
    let gw = "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [\"*\"]}]";
    let errs = check("Gateway", "gw.with.dots", gw).unwrap_err();
    assert!(
        errs.iter()
            .any(|e| e.contains("metadata.name: invalid gateway name: \"gw.with.dots\"")),
        "{errs:?}"
    );
    assert!(check("Gateway", "gw-ok", gw).is_ok());
    let errs = check("DestinationRule", "Upper", "host: a").unwrap_err();
    assert!(errs.iter().any(|e| e.contains("metadata.name")), "{errs:?}");
}

#[test]
fn all_errors_are_reported_at_once() {
    let errs = check(
        "VirtualService",
        "obj",
        "hosts: [a]\nhttp: [{route: [{destination: {host: a}, weight: 0}, {destination: {host: b}, weight: 0}], timeout: 0s}]",
    )
    .unwrap_err();
    assert_eq!(errs.len(), 2, "{errs:#?}");
}
