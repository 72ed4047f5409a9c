//! `kube-controller-manager`: parses upstream's flags, connects to the API server and runs the
//! enabled controllers. Everything lives in the `kcm` library (`kcm::app` is the composition
//! root), so that tests and the development API server reuse every part.

fn main() -> std::process::ExitCode {
    kcm::app::main(std::env::args_os().skip(1))
}
