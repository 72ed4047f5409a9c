//! The real binary under a `Type=notify` supervisor: with `$NOTIFY_SOCKET` bound by the test,
//! it says `READY=1` once its secure port listens and leader election runs, then `WATCHDOG=1`
//! every half `$WATCHDOG_USEC` while healthy, and `STOPPING=1` on SIGTERM. Its kubeconfig names
//! the server `localhost`, which the binary resolves itself (no NSS).

use std::net::TcpStream;
use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kcm_sandbox::sandbox::server::{Sandbox, SandboxOptions};

const BINARY: &str = env!("CARGO_BIN_EXE_kube-controller-manager");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The next notification, waiting up to a minute.
fn next(socket: &UnixDatagram, log: &std::path::Path) -> String {
    let mut buffer = [0; 512];
    match socket.recv(&mut buffer) {
        Ok(n) => String::from_utf8_lossy(&buffer[..n]).into_owned(),
        Err(e) => panic!("no notification ({e}); log:\n{}", std::fs::read_to_string(log).unwrap_or_default()),
    }
}

#[test]
fn ready_watchdog_and_stopping_over_notify_socket() {
    let sandbox =
        Sandbox::start(SandboxOptions { listen: "127.0.0.1:0".parse().unwrap(), ..Default::default() }).unwrap();
    let dir = std::env::temp_dir().join(format!("kcm-notify-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (_, kubeconfig) = sandbox.write_kubeconfigs(&dir.join("admin.conf")).unwrap();
    let text = std::fs::read_to_string(&kubeconfig).unwrap();
    let by_name =
        text.replace(&format!("https://{}", sandbox.addr()), &format!("https://localhost:{}", sandbox.addr().port()));
    assert_ne!(text, by_name, "the kubeconfig names the server");
    std::fs::write(&kubeconfig, by_name).unwrap();

    let socket_path = dir.join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let port = free_port();
    let log = dir.join("kcm.log");
    let mut child = Command::new(BINARY)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(["--leader-elect=true", "--leader-elect-retry-period=500ms", "--bind-address=127.0.0.1"])
        .arg(format!("--secure-port={port}"))
        .env("NOTIFY_SOCKET", &socket_path)
        .env("WATCHDOG_USEC", "1000000")
        .stderr(std::fs::File::create(&log).unwrap())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();

    let ready = next(&socket, &log);
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready}");
    TcpStream::connect(("127.0.0.1", port)).expect("the secure port listens once READY=1 is sent");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("attempting to acquire leader lease"), "the election started before READY=1:\n{text}");
    assert!(text.contains("connected to https://localhost:"), "{text}");
    assert_eq!(next(&socket, &log), "WATCHDOG=1");
    assert_eq!(next(&socket, &log), "WATCHDOG=1");

    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    let deadline = Instant::now() + Duration::from_secs(60);
    let stopping = loop {
        let message = next(&socket, &log);
        if message != "WATCHDOG=1" || Instant::now() > deadline {
            break message;
        }
    };
    assert_eq!(stopping, "STOPPING=1");
    let status = child.wait().unwrap();
    assert!(status.success(), "SIGTERM exits 0: {status:?}");
    let _ = std::fs::remove_dir_all(dir);
}
