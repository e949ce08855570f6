//! Text a user or a server hands the library: label selectors, cache keys, RFC 3339 times and
//! durations. Each parses to a value or a typed error; a selector or a key that parses prints as
//! text that parses back to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reflector::store_index::{split_meta_namespace_key, time, ObjectName, Selector};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(selector) = Selector::parse(text) {
        let printed = selector.to_string();
        let again = Selector::parse(&printed)
            .unwrap_or_else(|e| panic!("{text:?} printed as {printed:?}, which fails: {e}"));
        assert_eq!(again, selector, "{text:?} printed as {printed:?}");
    }
    if let Ok(name) = ObjectName::parse(text) {
        let printed = name.to_string();
        assert_eq!(ObjectName::parse(&printed).ok(), Some(name), "{text:?}");
    }
    let _ = split_meta_namespace_key(text);
    let _ = time::parse_rfc3339(text);
    let _ = time::parse_duration(text);
});
