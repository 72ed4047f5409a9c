//! `kube-controller-manager`: parses upstream's flags, connects to the API server and runs the
//! enabled controllers. Everything lives in the `kcm` library (`kcm::app` is the composition
//! root), so that tests and the development API server reuse every part.

/// A failed allocation ends the process with a clear line (`kcm::app::limits`).
#[global_allocator]
static ALLOCATOR: kcm::app::limits::ExitOnAllocationFailure = kcm::app::limits::ExitOnAllocationFailure;

fn main() -> std::process::ExitCode {
    kcm::app::limits::exit_on_panic();
    kcm::app::main(std::env::args_os().skip(1))
}
