//! End-to-end: the `raftmq namesrv` binary as an operator runs it.
//!
//! Starts the real binary on a port the kernel picks (`--listenPort 0`), reads the address from
//! RocketMQ's boot line, talks to it over TCP with our remoting client, then stops it with SIGTERM
//! and expects a clean exit. No sleeps: every wait is on an event (a line, a response, an exit).

use std::io::BufRead;
use std::io::BufReader;
use std::net::SocketAddr;
use std::process::Child;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;

use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::header::namesrv::GetRouteInfoRequestHeader;
use raftmq_common::remoting::RemotingClient;

const BOOT_LINE: &str = "The Name Server boot success. serializeType=JSON, address ";

struct Namesrv {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Namesrv {
    fn drop(&mut self) {
        // A failed test must not leak a server; a clean exit already reaped it.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_namesrv(extra: &[&str]) -> Namesrv {
    let mut child = Command::new(env!("CARGO_BIN_EXE_raftmq"))
        .args(["namesrv", "--listenPort", "0", "-D", "bindAddress=127.0.0.1", "-D", "kvConfigPath="])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the raftmq binary starts");
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut lines = BufReader::new(stdout).lines();
    let addr = loop {
        let line = lines.next().expect("the NameServer prints its boot line before exiting").expect("stdout is UTF-8");
        if let Some(addr) = line.strip_prefix(BOOT_LINE) {
            break addr.trim().parse().expect("the boot line ends with ip:port");
        }
    };
    Namesrv { child, addr }
}

#[tokio::test]
async fn namesrv_boots_answers_and_stops_on_sigterm() {
    let mut srv = start_namesrv(&[]);
    let client = RemotingClient::new();
    let addr = srv.addr.to_string();

    let header = GetRouteInfoRequestHeader { topic: "NoSuchTopic".to_owned(), accept_standard_json_only: Some(true) };
    let request = RemotingCommand::request_with_header(RequestCode::GetRouteinfoByTopic, &header);
    let response = client.invoke(&addr, request, Duration::from_secs(5)).await.expect("the NameServer answers");
    assert_eq!(response.response_code(), ResponseCode::TopicNotExist);
    assert!(response.remark.unwrap_or_default().contains("NoSuchTopic"), "the remark names the topic");

    let unknown = RemotingCommand::request(RequestCode::from_i32(9_999));
    let response = client.invoke(&addr, unknown, Duration::from_secs(5)).await.expect("the NameServer answers");
    assert_eq!(response.response_code(), ResponseCode::RequestCodeNotSupported);
    client.close().await;

    nix::sys::signal::kill(nix::unistd::Pid::from_raw(srv.child.id() as i32), nix::sys::signal::Signal::SIGTERM)
        .expect("SIGTERM is delivered");
    let status = srv.child.wait().expect("the NameServer exits");
    assert!(status.success(), "a graceful shutdown exits 0, got {status}");
}

#[test]
fn print_config_shows_merged_values_and_unknown_keys_fail() {
    let out = Command::new(env!("CARGO_BIN_EXE_raftmq"))
        .args(["namesrv", "-p", "--listenPort", "9999", "-D", "brokerChannelExpiredTime=30s"])
        .output()
        .expect("the raftmq binary runs");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("listenPort = 9999"), "{text}");

    let out = Command::new(env!("CARGO_BIN_EXE_raftmq"))
        .args(["namesrv", "-p", "-D", "noSuchKey=1"])
        .output()
        .expect("the raftmq binary runs");
    assert!(!out.status.success(), "an unknown key is an error");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("noSuchKey"), "the error names the key: {err}");
}

/// RocketMQ's own config files, Java properties, start the same processes their TOML twins do.
#[test]
fn rocketmq_properties_files_are_read_as_their_toml_twins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let conf = dir.path().join("broker.conf");
    std::fs::write(
        &conf,
        "brokerClusterName = DefaultCluster\nbrokerName = broker-x\nbrokerId = 0\ndeleteWhen = 04\n\
         brokerRole = ASYNC_MASTER\nflushDiskType = ASYNC_FLUSH\nlistenPort = 10921\n\
         clusterSecretFile = /etc/raftmq/cluster.secret\n",
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_raftmq"))
        .args(["broker", "-p", "-c"])
        .arg(&conf)
        .output()
        .expect("the raftmq binary runs");
    let (text, err) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{err}");
    for line in ["brokerName = \"broker-x\"", "deleteWhen = \"04\"", "listenPort = 10921"] {
        assert!(text.contains(line), "missing {line} in {text}");
    }
    assert!(!text.contains("brokerRole"), "a master/slave key is not a key of ours: {text}");

    // `-n` (and NAMESRV_ADDR) is a text value, taken as it is.
    let out = Command::new(env!("CARGO_BIN_EXE_raftmq"))
        .args(["broker", "-p", "-n", "10.0.0.9:9876;10.0.0.10:9876", "-c"])
        .arg(&conf)
        .env_remove("NAMESRV_ADDR")
        .output()
        .expect("the raftmq binary runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("namesrvAddr = \"10.0.0.9:9876;10.0.0.10:9876\""), "{text}");
    let out = Command::new(env!("CARGO_BIN_EXE_raftmq"))
        .args(["broker", "-p", "-D", "clusterSecretFile=/etc/raftmq/cluster.secret"])
        .env("NAMESRV_ADDR", "10.0.0.11:9876")
        .output()
        .expect("the raftmq binary runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("namesrvAddr = \"10.0.0.11:9876\""));
    // Without a cluster secret a NameServer beyond loopback is refused, saying what to set.
    let out = Command::new(env!("CARGO_BIN_EXE_raftmq"))
        .args(["broker", "-p"])
        .env("NAMESRV_ADDR", "10.0.0.11:9876")
        .output()
        .expect("the raftmq binary runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("clusterSecretFile"));

    let props = dir.path().join("namesrv.properties");
    std::fs::write(&props, "listenPort=9998\nbrokerChannelExpiredTime=30000\n").expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_raftmq"))
        .args(["namesrv", "-p", "-c"])
        .arg(&props)
        .output()
        .expect("the raftmq binary runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("listenPort = 9998"));
}
