//! The board's reader of a peer agent's HTTP answer (`peer::client::AnswerReader`): status
//! line and headers, Content-Length, chunked, or up to the end of the connection, with the
//! caps. The first two bytes choose the cap and where the answer is split into two reads.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netperfd::peer::client::{parse_response_capped, AnswerReader, MAX_HEAD};

fuzz_target!(|data: &[u8]| {
    let [a, b, rest @ ..] = data else {
        return;
    };
    // Caps from 0 to 64 KiB, and one that never binds.
    let cap = if *a == 255 {
        usize::MAX
    } else {
        usize::from(*a) * 257
    };
    let whole = parse_response_capped(rest, cap);
    if let Ok((status, body)) = &whole {
        assert!(body.len() <= cap);
        assert!((200..=999).contains(status));
    }
    // Split into two reads (and then byte by byte for short inputs): the same outcome as one
    // read — an answer, or an error of the same kind.
    let at = usize::from(*b) * rest.len() / 255;
    let (p, q) = rest.split_at(at.min(rest.len()));
    let mut r = AnswerReader::new(cap);
    let split = match r.feed(p) {
        Err(e) => Err(e),
        Ok(Some(x)) => Ok((x.status, x.body)),
        Ok(None) => match r.feed(q) {
            Err(e) => Err(e),
            Ok(Some(x)) => Ok((x.status, x.body)),
            Ok(None) => r.finish().map(|x| (x.status, x.body)),
        },
    };
    match (&whole, &split) {
        (Ok(x), Ok(y)) => assert_eq!(x, y),
        (Err(x), Err(y)) => assert_eq!(x, y),
        (x, y) => panic!("one read {x:?}, two reads {y:?}"),
    }
    if rest.len() <= 2 * MAX_HEAD {
        let mut r = AnswerReader::new(cap);
        let mut got = None;
        for byte in rest {
            match r.feed(std::slice::from_ref(byte)) {
                Err(e) => {
                    got = Some(Err(e));
                    break;
                }
                Ok(Some(x)) => {
                    got = Some(Ok((x.status, x.body)));
                    break;
                }
                Ok(None) => {}
            }
        }
        let bytewise = got.unwrap_or_else(|| r.finish().map(|x| (x.status, x.body)));
        assert_eq!(whole, bytewise);
    }
});
