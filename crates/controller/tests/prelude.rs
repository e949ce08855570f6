//! What `use controller::prelude::*;` brings, for code written against earlier releases: the
//! old names of the per-request parameters stay in the preludes, deprecated, until the next
//! breaking release, as the CHANGELOG promises (a warning, not an error).
#![allow(deprecated)]

use controller::prelude::*;

#[test]
fn the_old_parameter_names_still_come_with_the_prelude() {
    let create: PostParams = CreateOptions::default();
    let patch: PatchParams = PatchOptions {
        force: true,
        ..Default::default()
    };
    assert_eq!(create, CreateOptions::default());
    assert!(patch.force);
}
