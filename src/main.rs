use clap::{Parser, Subcommand};
use rudder::cmd;
use std::path::PathBuf;

/// mimalloc instead of glibc malloc: see docs/decisions.md and docs/performance.md.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc holds freed pages for 10 ms before giving them back; giving them back at once keeps the
/// daemon ~100 MiB smaller at 10,000 streams at no measurable cost (docs/performance.md). The
/// `MIMALLOC_PURGE_DELAY` environment variable still overrides it.
fn return_freed_memory_promptly() {
    /// `mi_option_purge_delay` in mimalloc.h's `mi_option_e` (mimalloc v3, the crate's default).
    const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets an integer option, which mimalloc allows at any time from any thread.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) }
    }
}

/// Rudder: an Istio-compatible service-mesh control plane (a drop-in for istiod).
#[derive(Parser)]
#[command(
    name = "rudder",
    version,
    about,
    args_conflicts_with_subcommands = true,
    args_override_self = true
)]
struct Cli {
    /// Log filter, e.g. `info` or `rudder=debug,info` (overridden by RUST_LOG).
    #[arg(long, global = true, default_value = "info")]
    log_level: String,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Option<Command>,
    /// `rudder` with no command serves, taking `serve`'s flags.
    #[command(flatten)]
    serve: cmd::serve::ServeArgs,
}

/// `rudder --log-format json serve`: the global flags may come before the subcommand, as `--help`
/// shows them; they are moved after it, where clap takes them (serve's own flags may also be given
/// without a subcommand, which is why flags before a subcommand otherwise conflict with it).
fn global_flags_after_subcommand(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    const GLOBAL: [&str; 2] = ["--log-level", "--log-format"];
    const COMMANDS: [&str; 8] = [
        "serve", "log", "crds", "validate", "shadow", "what-if", "precheck", "help",
    ];
    let mut globals = Vec::new();
    let mut i = 1;
    while i < args.len() {
        let arg = args[i].to_string_lossy();
        if GLOBAL.contains(&arg.as_ref()) && i + 1 < args.len() {
            globals.extend([args[i].clone(), args[i + 1].clone()]);
            i += 2;
        } else if GLOBAL.iter().any(|g| arg.starts_with(&format!("{g}="))) {
            globals.push(args[i].clone());
            i += 1;
        } else {
            break;
        }
    }
    let is_command = args
        .get(i)
        .is_some_and(|a| COMMANDS.contains(&a.to_string_lossy().as_ref()));
    if globals.is_empty() || !is_command {
        return args;
    }
    let mut out = vec![args[0].clone(), args[i].clone()];
    out.extend(globals);
    out.extend(args[i + 1..].iter().cloned());
    out
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run the control plane (the default when no command is given).
    #[command(args_override_self = true)]
    Serve(Box<cmd::serve::ServeArgs>),
    /// Show or change a running daemon's log levels (like `istioctl admin log`).
    Log {
        /// New levels, e.g. `ads:debug,default:info` or `rudder::xds=debug,info`; omit to show them.
        level: Option<String>,
        /// The daemon's monitoring address.
        #[arg(long, default_value = "127.0.0.1:15014")]
        addr: String,
    },
    /// Print the CustomResourceDefinitions of every Istio kind, generated from the config model.
    Crds,
    /// Check Istio config files with the daemon's validation rules.
    Validate {
        /// A file, a directory (searched recursively) or `-` for standard input. Repeatable.
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<PathBuf>,
        /// Namespace for objects that do not name one.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
    /// Beside a live istiod, compare what it sends each proxy with what Rudder would send.
    Shadow(cmd::shadow::ShadowArgs),
    /// Before a change is applied: which proxies' config it changes, and how.
    WhatIf(cmd::what_if::WhatIfArgs),
    /// Before switching from istiod: what Rudder would refuse or not honour, and go or no-go.
    Precheck(cmd::precheck::PrecheckArgs),
}

fn main() -> std::process::ExitCode {
    return_freed_memory_promptly();
    cmd::without_transparent_huge_pages();
    let (args, istiod_flags_not_read) = cmd::istiod_flags::translate(std::env::args_os().collect());
    let cli = Cli::parse_from(global_flags_after_subcommand(args));
    match cli.command {
        Some(Command::Log { level, addr }) => match cmd::log::run(&addr, level.as_deref()) {
            Ok(out) => {
                println!("{out}");
                std::process::ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                std::process::ExitCode::FAILURE
            }
        },
        Some(Command::Validate { files, namespace }) => {
            let code = cmd::validate::run(
                &files,
                &namespace,
                &mut std::io::stdout(),
                &mut std::io::stderr(),
            );
            std::process::ExitCode::from(code as u8)
        }
        Some(Command::Crds) => {
            print!("{}", rudder::config::crd::all_yaml());
            std::process::ExitCode::SUCCESS
        }
        Some(Command::Shadow(args)) => {
            report_command(&cli.log_level, cli.log_format, |out, err| {
                Box::pin(cmd::shadow::run(args, out, err))
            })
        }
        Some(Command::WhatIf(args)) => {
            report_command(&cli.log_level, cli.log_format, |out, err| {
                Box::pin(cmd::what_if::run(args, out, err))
            })
        }
        Some(Command::Precheck(args)) => {
            report_command(&cli.log_level, cli.log_format, |out, err| {
                Box::pin(cmd::precheck::run(args, out, err))
            })
        }
        command @ (Some(Command::Serve(_)) | None) => {
            use std::io::IsTerminal;
            rudder::logging::init(
                &cli.log_level,
                matches!(cli.log_format, LogFormat::Json),
                std::io::stderr().is_terminal(),
            );
            for (flag, why) in &istiod_flags_not_read {
                tracing::warn!(flag, why, "istiod flag accepted but not acted on");
            }
            let args = match command {
                Some(Command::Serve(args)) => *args,
                _ => cli.serve,
            };
            let Some(runtime) = runtime() else {
                return std::process::ExitCode::FAILURE;
            };
            match runtime.block_on(cmd::serve::run(args)) {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = %e, "rudder failed");
                    eprintln!("error: {e}");
                    std::process::ExitCode::FAILURE
                }
            }
        }
    }
}

fn runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("rudder")
        .build()
    {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            None
        }
    }
}

type ReportFuture<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = i32> + 'a>>;

/// Runs a report command (`shadow`, `what-if`, `precheck`) to its exit code. What the config
/// sources log on the way is kept to warnings, unless `--log-level` asks for more than the
/// default: the report is the output.
fn report_command(
    log_level: &str,
    log_format: LogFormat,
    command: impl for<'a> FnOnce(
        &'a mut dyn std::io::Write,
        &'a mut dyn std::io::Write,
    ) -> ReportFuture<'a>,
) -> std::process::ExitCode {
    use std::io::IsTerminal;
    let level = if log_level == "info" {
        "warn"
    } else {
        log_level
    };
    rudder::logging::init(
        level,
        matches!(log_format, LogFormat::Json),
        std::io::stderr().is_terminal(),
    );
    let Some(runtime) = runtime() else {
        return std::process::ExitCode::FAILURE;
    };
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    let code = runtime.block_on(command(&mut out, &mut err));
    std::process::ExitCode::from(code as u8)
}
