use clap::{Parser, Subcommand};
use rudder::cmd;
use std::path::PathBuf;
use tracing_subscriber::EnvFilter;

/// Rudder: an Istio-compatible service-mesh control plane (a drop-in for istiod).
#[derive(Parser)]
#[command(
    name = "rudder",
    version,
    about,
    args_conflicts_with_subcommands = true
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

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run the control plane (the default when no command is given).
    Serve(Box<cmd::serve::ServeArgs>),
    /// Check Istio config files with the daemon's validation rules.
    Validate {
        /// A file, a directory (searched recursively) or `-` for standard input. Repeatable.
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<PathBuf>,
        /// Namespace for objects that do not name one.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
}

fn init_logging(level: &str, format: LogFormat) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Validate { files, namespace }) => {
            let code = cmd::validate::run(
                &files,
                &namespace,
                &mut std::io::stdout(),
                &mut std::io::stderr(),
            );
            std::process::ExitCode::from(code as u8)
        }
        command => {
            init_logging(&cli.log_level, cli.log_format);
            let args = match command {
                Some(Command::Serve(args)) => *args,
                _ => cli.serve,
            };
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("rudder")
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("error: cannot start the async runtime: {e}");
                    return std::process::ExitCode::FAILURE;
                }
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
