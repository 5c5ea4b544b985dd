//! EnvoyFilter patches through a real Envoy 1.40 sidecar: what the patches change is what the
//! proxy does, and a patch that cannot apply leaves the rest served, reported, never NACKed.

use crate::common::peers::{Backend, Envoy, free_port, peer, request_full};
use crate::common::{Daemon, eventually, http_get, metric, write};

const NS: &str = "shop";
const HOST: &str = "web.shop.svc.cluster.local";

fn service(port: u16, backend: u16) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: web, namespace: {NS}}}\nspec:\n  hosts: [{HOST}]\n  location: MESH_INTERNAL\n  ports: [{{number: {port}, name: http, protocol: HTTP}}]\n  resolution: STATIC\n  endpoints: [{{address: 127.0.0.1, ports: {{http: {backend}}}}}]\n"
    )
}

/// A Lua filter inserted before the router (root namespace, every sidecar) adds a response
/// header; a cluster MERGE changes the service cluster's connect timeout (seen in Envoy's own
/// `/config_dump`); a second EnvoyFilter at a lower priority inserts its Lua filter first, so
/// its header is set last; a patch of a kind Rudder does not apply (BOOTSTRAP) is shown in
/// `/debug/envoy_filters` and counted, the rest applies, and Envoy NACKs nothing. (A value that is
/// not its Envoy type is refused before it is stored, as istiod's admission refuses it.)
#[test]
fn envoy_filter_patches_change_what_envoy_does() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let backend = Backend::start("v1");
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "web.yaml", &service(port, backend.port));
    let lua = |header: &str, value: &str| {
        format!(
            r#"{{name: envoy.filters.http.lua, typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua, defaultSourceCode: {{inlineString: "function envoy_on_response(h) h:headers():replace('{header}', '{value}') end"}}}}}}"#
        )
    };
    write(
        dir.path(),
        "filters.yaml",
        &format!(
            r#"apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {{name: lua-header, namespace: istio-system}}
spec:
  configPatches:
  - applyTo: HTTP_FILTER
    match:
      context: SIDECAR_OUTBOUND
      listener:
        portNumber: {port}
        filterChain: {{filter: {{name: envoy.filters.network.http_connection_manager, subFilter: {{name: envoy.filters.http.router}}}}}}
    patch: {{operation: INSERT_BEFORE, value: {lua_a}}}
  - applyTo: CLUSTER
    match: {{context: SIDECAR_OUTBOUND, cluster: {{service: {HOST}}}}}
    patch: {{operation: MERGE, value: {{connect_timeout: 3.5s}}}}
  - applyTo: BOOTSTRAP
    patch: {{operation: MERGE, value: {{}}}}
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {{name: early, namespace: {NS}}}
spec:
  priority: -1
  configPatches:
  - applyTo: HTTP_FILTER
    match: {{context: SIDECAR_OUTBOUND, listener: {{portNumber: {port}}}}}
    patch: {{operation: INSERT_FIRST, value: {lua_b}}}
"#,
            lua_a = lua("x-order", "late"),
            lua_b = lua("x-order", "early").replace("envoy.filters.http.lua", "early.lua"),
        ),
    );
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    // Response filters run in reverse: the filter inserted first sets its header last.
    eventually(30, "the Lua filters set the response header", || {
        let answer = request_full(port, HOST, "/", &[]);
        answer.status == 200 && answer.header("x-order") == Some("early")
    });
    let (_, dump) = http_get(envoy.admin, "/config_dump");
    assert!(
        dump.contains("\"connect_timeout\": \"3.500s\""),
        "the cluster patch"
    );
    assert!(dump.contains("early.lua") && dump.contains("envoy.filters.http.lua"));
    let (_, debug) = http_get(daemon.addr("monitoring"), "/debug/envoy_filters");
    let debug: serde_json::Value = serde_json::from_str(&debug).unwrap();
    let skipped = debug["notApplied"].as_array().cloned().unwrap_or_default();
    assert_eq!(skipped.len(), 1, "{debug}");
    assert_eq!(skipped[0]["envoyFilter"], "istio-system/lua-header");
    assert_eq!(skipped[0]["patch"], 2);
    let patched: Vec<&serde_json::Value> = debug["envoyFilters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| !f["proxies"].as_array().is_none_or(|p| p.is_empty()))
        .collect();
    assert_eq!(
        patched.len(),
        2,
        "both EnvoyFilters patch the sidecar: {debug}"
    );
    assert_eq!(metric(&daemon, "pilot_total_xds_rejects"), 0.0);
    assert_eq!(
        metric(&daemon, "rudder_envoy_filter_patches_not_applied"),
        1.0
    );
}

/// An EnvoyFilter that Envoy rejects (a Lua filter that does not compile, inserted on one port):
/// Envoy NACKs the listeners, `/debug/syncz` names the EnvoyFilter beside Envoy's error, and the
/// proxy keeps serving with its last good config; removing the EnvoyFilter clears the NACK.
#[test]
fn a_rejected_patch_is_named_in_the_nack() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let backend = Backend::start("v1");
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "web.yaml", &service(port, backend.port));
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let _envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    eventually(30, "the sidecar routes", || {
        request_full(port, HOST, "/", &[]).status == 200
    });
    write(
        dir.path(),
        "bad.yaml",
        &format!(
            r#"apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {{name: bad-lua, namespace: {NS}}}
spec:
  configPatches:
  - applyTo: HTTP_FILTER
    match: {{context: SIDECAR_OUTBOUND, listener: {{portNumber: {port}}}}}
    patch:
      operation: INSERT_FIRST
      value: {{name: envoy.filters.http.lua, typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua, defaultSourceCode: {{inlineString: "function ("}}}}}}
"#
        ),
    );
    eventually(30, "the NACK names the EnvoyFilter", || {
        let (_, syncz) = http_get(daemon.addr("monitoring"), "/debug/syncz");
        syncz.contains("patched by EnvoyFilter shop/bad-lua")
    });
    assert_eq!(
        request_full(port, HOST, "/", &[]).status,
        200,
        "the last good config serves"
    );
    std::fs::remove_file(dir.path().join("bad.yaml")).unwrap();
    eventually(30, "the NACK clears", || {
        let (_, syncz) = http_get(daemon.addr("monitoring"), "/debug/syncz");
        !syncz.contains("bad-lua")
    });
}

/// Lua TrafficExtensions: a real Envoy runs them in istiod's order (higher `priority` first in
/// the chain, so on the response it runs last and its header wins), only where `match` says (a
/// SERVER-mode extension leaves the sidecar's outbound traffic alone), and a change to one is
/// applied without restarting anything.
#[test]
fn traffic_extension_lua_filters_run_in_priority_order() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let backend = Backend::start("v1");
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "web.yaml", &service(port, backend.port));
    let extension = |name: &str, priority: i32, mode: &str, header: &str, value: &str| {
        format!(
            "apiVersion: extensions.istio.io/v1alpha1\nkind: TrafficExtension\nmetadata: {{name: {name}, namespace: istio-system}}\nspec:\n  priority: {priority}\n  match: [{{mode: {mode}, ports: [{{number: {port}}}]}}]\n  lua:\n    inlineCode: |\n      function envoy_on_response(h) h:headers():replace('{header}', '{value}') end\n---\n"
        )
    };
    let write_all = |ten: &str| {
        write(
            dir.path(),
            "extensions.yaml",
            &[
                extension("ten", 10, "CLIENT", "x-te", ten),
                extension("five", 5, "CLIENT_AND_SERVER", "x-te", "five"),
                extension("inbound-only", 20, "SERVER", "x-server", "yes"),
            ]
            .concat(),
        )
    };
    write_all("ten");
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let _envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    eventually(30, "the higher priority's header wins", || {
        let answer = request_full(port, HOST, "/", &[]);
        answer.status == 200 && answer.header("x-te") == Some("ten")
    });
    assert_eq!(request_full(port, HOST, "/", &[]).header("x-server"), None);
    write_all("changed");
    eventually(30, "the changed script runs", || {
        request_full(port, HOST, "/", &[]).header("x-te") == Some("changed")
    });
    assert_eq!(metric(&daemon, "pilot_total_xds_rejects"), 0.0);
}

/// A minimal proxy-wasm filter (ABI 0.2.1): on the response it adds `x-wasm: <value>`.
fn wasm_filter(value: &str) -> Vec<u8> {
    let header = "x-wasm";
    wat::parse_str(format!(
        r#"(module
  (import "env" "proxy_add_header_map_value" (func $add (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "{header}")
  (data (i32.const 64) "{value}")
  (global $heap (mut i32) (i32.const 1024))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_memory_allocate") (param $size i32) (result i32)
    (local $at i32)
    (local.set $at (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get $size)))
    (local.get $at))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_vm_start") (param i32 i32) (result i32) (i32.const 1))
  (func (export "proxy_on_configure") (param i32 i32) (result i32) (i32.const 1))
  (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32)
    (drop (call $add (i32.const 2) (i32.const 16) (i32.const {}) (i32.const 64) (i32.const {})))
    (i32.const 0))
  (func (export "proxy_on_done") (param i32) (result i32) (i32.const 1))
  (func (export "proxy_on_delete") (param i32)))"#,
        header.len(),
        value.len()
    ))
    .expect("the test module assembles")
}

/// A WasmPlugin whose module is a local file: the sidecar's connection manager asks for the
/// filter over ECDS, gets the Wasm filter istiod would send, and a real Envoy runs the module
/// (V8) on every response; a change to the WasmPlugin's module reaches the proxy. SotW and
/// Delta alike.
#[test]
fn a_wasm_plugin_runs_in_envoy() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    for delta in [false, true] {
        wasm_plugin_runs(&envoy_bin, delta);
    }
}

fn wasm_plugin_runs(envoy_bin: &std::path::Path, delta: bool) {
    let backend = Backend::start("v1");
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let modules = tempfile::tempdir().unwrap();
    let module = |name: &str, value: &str| {
        let path = modules.path().join(name);
        std::fs::write(&path, wasm_filter(value)).unwrap();
        path.display().to_string()
    };
    write(dir.path(), "web.yaml", &service(port, backend.port));
    let plugin = |path: &str| {
        format!(
            "apiVersion: extensions.istio.io/v1alpha1\nkind: WasmPlugin\nmetadata: {{name: header, namespace: {NS}}}\nspec:\n  url: file://{path}\n  phase: STATS\n  failStrategy: FAIL_OPEN\n  pluginConfig: {{greeting: hello}}\n"
        )
    };
    write(
        dir.path(),
        "plugin.yaml",
        &plugin(&module("one.wasm", "one")),
    );
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let envoy = Envoy::start(envoy_bin, daemon.addr("grpc-xds"), NS, delta);
    eventually(30, "the Wasm filter adds its header", || {
        let answer = request_full(port, HOST, "/", &[]);
        answer.status == 200 && answer.header("x-wasm") == Some("one")
    });
    let (_, dump) = http_get(envoy.admin, "/config_dump");
    assert!(
        dump.contains(
            "extensions.istio.io/trafficextension/shop.header~istio-translated-wasmplugin"
        ),
        "the filter has istiod's name"
    );
    write(
        dir.path(),
        "plugin.yaml",
        &plugin(&module("two.wasm", "two")),
    );
    eventually(30, "the new module runs", || {
        request_full(port, HOST, "/", &[]).header("x-wasm") == Some("two")
    });
    assert_eq!(metric(&daemon, "pilot_total_xds_rejects"), 0.0);
}

/// A proxy-wasm filter that traps on every request's headers: the plugin fails at run time.
fn trapping_wasm_filter() -> Vec<u8> {
    wat::parse_str(
        r#"(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_memory_allocate") (param $size i32) (result i32)
    (local $at i32)
    (local.set $at (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get $size)))
    (local.get $at))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_vm_start") (param i32 i32) (result i32) (i32.const 1))
  (func (export "proxy_on_configure") (param i32 i32) (result i32) (i32.const 1))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32) unreachable)
  (func (export "proxy_on_done") (param i32) (result i32) (i32.const 1))
  (func (export "proxy_on_delete") (param i32)))"#,
    )
    .expect("the test module assembles")
}

/// `failStrategy` as Envoy applies the failure policy Rudder sends: a plugin that fails at run
/// time lets requests through under FAIL_OPEN and refuses them (503) under FAIL_CLOSE.
#[test]
fn a_failing_wasm_plugin_fails_open_or_closed_as_its_strategy_says() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let backend = Backend::start("v1");
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let modules = tempfile::tempdir().unwrap();
    let module = modules.path().join("trap.wasm");
    std::fs::write(&module, trapping_wasm_filter()).unwrap();
    write(dir.path(), "web.yaml", &service(port, backend.port));
    let plugin = |strategy: &str| {
        format!(
            "apiVersion: extensions.istio.io/v1alpha1\nkind: WasmPlugin\nmetadata: {{name: trap, namespace: {NS}}}\nspec:\n  url: file://{}\n  failStrategy: {strategy}\n",
            module.display()
        )
    };
    write(dir.path(), "plugin.yaml", &plugin("FAIL_OPEN"));
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, true);
    eventually(30, "fail open: requests pass the failed plugin", || {
        request_full(port, HOST, "/", &[]).status == 200
    });
    // The plugin is in place (Envoy waits for it before serving) and ran, failing, on that request.
    let (_, dump) = http_get(envoy.admin, "/config_dump");
    assert!(
        dump.contains("FAIL_OPEN"),
        "the failure policy reached Envoy"
    );
    write(dir.path(), "plugin.yaml", &plugin("FAIL_CLOSE"));
    eventually(30, "fail closed: requests are refused", || {
        request_full(port, HOST, "/", &[]).status == 503
    });
    assert_eq!(metric(&daemon, "pilot_total_xds_rejects"), 0.0);
}

/// An EnvoyFilter that adds an HTTP filter whose config comes over ECDS, and the config itself as
/// an EXTENSION_CONFIG patch: a real Envoy asks for it by name and runs it.
#[test]
fn an_extension_config_patch_is_served_over_ecds() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let backend = Backend::start("v1");
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "web.yaml", &service(port, backend.port));
    write(
        dir.path(),
        "filter.yaml",
        &format!(
            r#"apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {{name: discovered, namespace: {NS}}}
spec:
  configPatches:
  - applyTo: HTTP_FILTER
    match:
      context: SIDECAR_OUTBOUND
      listener:
        portNumber: {port}
        filterChain: {{filter: {{name: envoy.filters.network.http_connection_manager, subFilter: {{name: envoy.filters.http.router}}}}}}
    patch:
      operation: INSERT_BEFORE
      value:
        name: discovered-lua
        config_discovery:
          config_source: {{ads: {{}}, initial_fetch_timeout: 0s}}
          type_urls: [type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua]
  - applyTo: EXTENSION_CONFIG
    patch:
      operation: ADD
      value:
        name: discovered-lua
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
          defaultSourceCode: {{inlineString: "function envoy_on_response(h) h:headers():add('x-ecds', 'served') end"}}
"#
        ),
    );
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let _envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    eventually(30, "the discovered Lua filter runs", || {
        let answer = request_full(port, HOST, "/", &[]);
        answer.status == 200 && answer.header("x-ecds") == Some("served")
    });
    assert_eq!(metric(&daemon, "pilot_total_xds_rejects"), 0.0);
}

/// A network proxy-wasm filter (ABI 0.2.1) counting connections in a custom metric.
fn network_wasm_filter() -> Vec<u8> {
    let metric = "tcp_wasm_connections";
    wat::parse_str(format!(
        r#"(module
  (import "env" "proxy_define_metric" (func $define (param i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_increment_metric" (func $inc (param i32 i64) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "{metric}")
  (global $heap (mut i32) (i32.const 1024))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_memory_allocate") (param $size i32) (result i32)
    (local $at i32)
    (local.set $at (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get $size)))
    (local.get $at))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_vm_start") (param i32 i32) (result i32) (i32.const 1))
  (func (export "proxy_on_configure") (param i32 i32) (result i32)
    (drop (call $define (i32.const 0) (i32.const 16) (i32.const {len}) (i32.const 256)))
    (i32.const 1))
  (func (export "proxy_on_new_connection") (param i32) (result i32)
    (drop (call $inc (i32.load (i32.const 256)) (i64.const 1)))
    (i32.const 0))
  (func (export "proxy_on_downstream_data") (param i32 i32 i32) (result i32) (i32.const 0))
  (func (export "proxy_on_upstream_data") (param i32 i32 i32) (result i32) (i32.const 0))
  (func (export "proxy_on_done") (param i32) (result i32) (i32.const 1))
  (func (export "proxy_on_delete") (param i32)))"#,
        len = metric.len()
    ))
    .expect("the test module assembles")
}

/// A WasmPlugin of type NETWORK goes into the TCP chains of the services it matches, its config
/// over ECDS as a network Wasm filter; a real Envoy runs it on each connection.
#[test]
fn a_network_wasm_plugin_runs_on_tcp_connections() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let backend = Backend::start("v1");
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("module").with_extension("wasm");
    std::fs::write(&module, network_wasm_filter()).unwrap();
    write(
        dir.path(),
        "tcp.yaml",
        &format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: db, namespace: {NS}}}\nspec:\n  hosts: [db.shop.svc.cluster.local]\n  addresses: [240.0.0.9]\n  location: MESH_INTERNAL\n  ports: [{{number: {port}, name: tcp, protocol: TCP}}]\n  resolution: STATIC\n  endpoints: [{{address: 127.0.0.1, ports: {{tcp: {}}}}}]\n",
            backend.port
        ),
    );
    write(
        dir.path(),
        "plugin.yaml",
        &format!(
            "apiVersion: extensions.istio.io/v1alpha1\nkind: WasmPlugin\nmetadata: {{name: counter, namespace: {NS}}}\nspec:\n  url: file://{}\n  type: NETWORK\n  match: [{{ports: [{{number: {port}}}]}}]\n",
            module.display()
        ),
    );
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    eventually(30, "the network filter counts connections", || {
        let _ = request_full(port, "db.shop.svc.cluster.local", "/", &[]);
        let (_, stats) = http_get(envoy.admin, "/stats?filter=tcp_wasm_connections");
        stats
            .lines()
            .any(|l| l.contains("tcp_wasm_connections") && !l.trim_end().ends_with(": 0"))
    });
    assert_eq!(metric(&daemon, "pilot_total_xds_rejects"), 0.0);
}

/// Istio's documented local rate limit (`samples/ratelimit/local-rate-limit-service.yaml`): an
/// EnvoyFilter whose value is wrapped in `udpa.type.v1.TypedStruct`. Admitted as istiod admits it,
/// served without a NACK, and enforced by a real Envoy: one token, so the second request is
/// refused with 429.
#[test]
fn a_typed_struct_local_rate_limit_is_enforced() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let backend = Backend::start("v1");
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "web.yaml", &service(port, backend.port));
    write(
        dir.path(),
        "ratelimit.yaml",
        &format!(
            r#"apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {{name: local-ratelimit, namespace: {NS}}}
spec:
  configPatches:
  - applyTo: HTTP_FILTER
    match:
      context: SIDECAR_OUTBOUND
      listener:
        portNumber: {port}
        filterChain: {{filter: {{name: envoy.filters.network.http_connection_manager, subFilter: {{name: envoy.filters.http.router}}}}}}
    patch:
      operation: INSERT_BEFORE
      value:
        name: envoy.filters.http.local_ratelimit
        typed_config:
          "@type": type.googleapis.com/udpa.type.v1.TypedStruct
          type_url: type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit
          value:
            stat_prefix: http_local_rate_limiter
            token_bucket: {{max_tokens: 1, tokens_per_fill: 1, fill_interval: 600s}}
            filter_enabled: {{runtime_key: local_rate_limit_enabled, default_value: {{numerator: 100, denominator: HUNDRED}}}}
            filter_enforced: {{runtime_key: local_rate_limit_enforced, default_value: {{numerator: 100, denominator: HUNDRED}}}}
"#
        ),
    );
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let _envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    eventually(30, "the rate limit refuses a request", || {
        request_full(port, HOST, "/", &[]).status == 429
    });
    assert_eq!(metric(&daemon, "pilot_total_xds_rejects"), 0.0);
}
