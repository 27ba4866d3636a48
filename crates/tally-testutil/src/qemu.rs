//! What a test of `tally sim -- PROG` needs: QEMU's user-mode emulator
//! (`qemu-x86_64`) and tally's QEMU plugin.
//!
//! The plugin is its own workspace (it links GPL bindings), so `cargo
//! build` and `cargo test` of tally's workspace do not build it: [`BUILD`]
//! does, into the workspace's `target/`, next to the `tally` binary the
//! tests run, where tally looks for it. The rule of [`crate::tools`]
//! applies to the plugin as to any tool: a test without it is skipped
//! locally (a new user's `cargo test` passes) and fails under CI, which
//! builds it.

use std::path::{Path, PathBuf};

/// The file name of tally's QEMU plugin.
pub const PLUGIN_FILE: &str = "libtally_qemu_plugin.so";

/// The command that builds the plugin where tally and these tests find
/// it (next to `target/release/tally`), run at the workspace's root.
pub const BUILD: &str = "cargo build --release \
    --manifest-path crates/tally-qemu-plugin/Cargo.toml --target-dir target";

/// Where a build of the plugin into the workspace's `target/` puts it:
/// next to `tally`, the binary a test runs (`env!("CARGO_BIN_EXE_tally")`).
pub fn beside(tally: impl AsRef<Path>) -> PathBuf {
    tally.as_ref().with_file_name(PLUGIN_FILE)
}

/// The plugin that `tally` finds when run in the test's environment: the
/// first file of `$TALLY_QEMU_PLUGIN` and the one [`beside`] tally, as
/// tally looks (the user's data directory, where `tally sim
/// --install-plugin` copies it, is left out: the tests use the plugin
/// the work tree built); `None` when neither exists.
pub fn plugin(tally: impl AsRef<Path>) -> Option<PathBuf> {
    std::env::var_os("TALLY_QEMU_PLUGIN")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .chain([beside(tally)])
        .find(|p| p.is_file())
}

/// For a test that runs `tally sim -- PROG` with tally in the test's
/// environment and also needs `tools`: `true` when `qemu-x86_64`, every
/// one of `tools` and the [`plugin`] are there; otherwise the test is
/// skipped ([`crate::skip`], a failure under CI) and this returns `false`
/// (`if !qemu::require(env!("CARGO_BIN_EXE_tally"), &["gcc"]) { return; }`).
pub fn require(tally: impl AsRef<Path>, tools: &[&str]) -> bool {
    require_plugin(plugin(&tally).is_some(), tools)
}

/// [`require`] for a test that runs tally in a cleared environment (`env
/// -i`, so that the program's stack is the same as under Valgrind): there
/// `$TALLY_QEMU_PLUGIN` does not reach tally, and only the plugin
/// [`beside`] tally counts.
pub fn require_beside(tally: impl AsRef<Path>, tools: &[&str]) -> bool {
    require_plugin(beside(&tally).is_file(), tools)
}

fn require_plugin(found: bool, tools: &[&str]) -> bool {
    if !crate::require(&["qemu-x86_64"]) || !crate::require(tools) {
        return false;
    }
    if !found {
        crate::skip(&format!("tally's QEMU plugin (build it with `{BUILD}`)"));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugin_is_looked_for_beside_tally() {
        assert_eq!(
            beside("/x/target/release/tally"),
            Path::new("/x/target/release/libtally_qemu_plugin.so")
        );
        if std::env::var_os("TALLY_QEMU_PLUGIN").is_none() {
            assert_eq!(plugin("/no/such/dir/tally"), None);
        }
    }
}
