//! Fuzz target: arbitrary bytes as a remoting frame and as the header families a broker decodes.
//! Invariant under test: no input panics, loops or allocates beyond its own size a bounded number
//! of times (`RemotingCommand::decode_frame`, typed headers, the frame length check); a frame that
//! decodes re-encodes and decodes to the same command.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::command::check_frame_len;
use raftmq_common::protocol::header::pull::PullMessageRequestHeader;
use raftmq_common::protocol::header::send::SendMessageRequestHeader;
use raftmq_common::protocol::header::send::SendMessageRequestHeaderV2;

fuzz_target!(|data: &[u8]| {
    if let Some(word) = data.get(..4) {
        let _ = check_frame_len(i32::from_be_bytes([word[0], word[1], word[2], word[3]]));
    }
    let Ok(command) = RemotingCommand::decode_frame(Bytes::copy_from_slice(data)) else { return };
    let _ = command.decode_header::<PullMessageRequestHeader>();
    let _ = command.decode_header::<SendMessageRequestHeader>();
    let _ = command.decode_header::<SendMessageRequestHeaderV2>();
    if let Ok(encoded) = command.encode() {
        // `encode` writes the length word; `decode_frame` takes the frame after it.
        let again =
            RemotingCommand::decode_frame(Bytes::copy_from_slice(&encoded[4..])).expect("a re-encoded command decodes");
        assert_eq!(again.code, command.code);
        assert_eq!(again.opaque, command.opaque);
        assert_eq!(again.body, command.body);
    }
});
