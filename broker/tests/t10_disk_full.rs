//! A full disk under the mapped ConsumeQueue and IndexFile files is an error, never a SIGBUS.
//!
//! Both kinds of file are created sparse at their full size and written through a mapping; without
//! blocks reserved ahead (`broker/src/disk_space.rs`) the first store into a page the file system
//! cannot allocate kills the process. The test mounts an 8 MiB tmpfs, which needs root and the mount
//! capability; without them it says SKIPPED and passes nothing off as tested.

use std::path::Path;
use std::path::PathBuf;
use std::process::Command;

use raftmq_broker::state::consume_queue::ConsumeQueue;
use raftmq_broker::state::consume_queue::CqError;
use raftmq_broker::state::consume_queue::CqUnit;
use raftmq_broker::state::index_file::IndexError;
use raftmq_broker::state::index_file::IndexFile;
use raftmq_broker::state::index_file::IndexFileSizes;

const FS_BYTES: u64 = 8 * 1024 * 1024;

/// A tmpfs of `FS_BYTES` mounted on a fresh directory, unmounted on drop.
struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    fn mount() -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={FS_BYTES}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!("mount -t tmpfs failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(Self { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

fn skip(why: &str) {
    raftmq_common::test_skip::announce_skip("t10_disk_full", why);
}

fn is_no_space(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(nix::libc::ENOSPC)
}

#[test]
fn a_consume_queue_on_a_full_disk_refuses_the_append_and_keeps_what_it_wrote() {
    let fs = match SmallFs::mount() {
        Ok(fs) => fs,
        Err(why) => return skip(&why),
    };
    // One file of 20 MB: more than twice the file system, sparse until written.
    let units_per_file = 1_000_000;
    let dir: PathBuf = fs.path().join("consumequeue/T/0");
    let mut queue = ConsumeQueue::open(&dir, units_per_file).expect("open");
    let mut appended = 0u64;
    let error = loop {
        let unit = CqUnit { phy_offset: appended as i64 * 100, size: 100, tags_code: 0 };
        match queue.append(appended, unit) {
            Ok(_) => appended += 1,
            Err(e) => break e,
        }
        assert!(appended < units_per_file, "an 8 MiB file system held a 20 MB queue file");
    };
    assert!(
        matches!(&error, CqError::Io { op: "fallocate", source, .. } if is_no_space(source)),
        "expected ENOSPC from fallocate, got {error}"
    );
    assert!(appended > 0, "the first units fit");
    assert_eq!(queue.max_offset(), appended, "a refused append leaves the queue as it was");
    let last = queue.unit_at(appended - 1).expect("the last unit reads back");
    assert_eq!(last.phy_offset, (appended as i64 - 1) * 100);
}

#[test]
fn an_index_file_on_a_full_disk_refuses_the_key_and_a_new_file() {
    let fs = match SmallFs::mount() {
        Ok(fs) => fs,
        Err(why) => return skip(&why),
    };
    // Slots (1 MiB) fit; the entries (20 MB) do not.
    let sizes = IndexFileSizes { slot_count: 256 * 1024, entry_count: 1_000_000 };
    let mut index = IndexFile::create(&fs.path().join("index"), sizes).expect("the slots fit");
    let mut put = 0i64;
    let error = loop {
        match index.put_key(&format!("T#k{put}"), put * 100 + 1, 1_000) {
            Ok(true) => put += 1,
            Ok(false) => panic!("the file filled up before the disk did"),
            Err(e) => break e,
        }
    };
    assert!(
        matches!(&error, IndexError::Io { op: "fallocate", source, .. } if is_no_space(source)),
        "expected ENOSPC from fallocate, got {error}"
    );
    assert!(put > 0, "the first keys fit");
    assert_eq!(index.header().index_count as i64, put + 1, "a refused key changes nothing");
    let mut found = Vec::new();
    index.select_phy_offsets("T#k0", 8, 0, i64::MAX, &mut found);
    assert_eq!(found, vec![1], "keys put before the disk filled are still found");

    // The next file cannot get its first blocks: refused, and nothing is left for a restart to trip on.
    let next = fs.path().join("index-next");
    match IndexFile::create(&next, sizes) {
        Err(IndexError::Io { op: "fallocate", source, .. }) if is_no_space(&source) => {}
        other => panic!("expected ENOSPC from create, got {other:?}"),
    }
    assert!(!next.exists(), "a refused create removes its file");
}
