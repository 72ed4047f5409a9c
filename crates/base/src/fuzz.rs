//! Shared settings of the property tests that feed generated bad input to the parsers and
//! decoders (docs/reliability.md, "Fuzzing"): a fixed seed and no failure files, so that CI runs the same
//! cases every time; `PROPTEST_CASES` and `PROPTEST_RNG_SEED` explore further locally.

use proptest::test_runner::{Config, RngAlgorithm, RngSeed};

/// The seed every property test starts from unless `PROPTEST_RNG_SEED` gives another.
const SEED: u64 = 21;

/// A config running `cases` cases (or `PROPTEST_CASES`) from the fixed seed (or
/// `PROPTEST_RNG_SEED`), without writing failures to files: a found input becomes a regular
/// regression test instead.
pub fn config(cases: u32) -> Config {
    let from_env = Config::default();
    let set = |name: &str| std::env::var_os(name).is_some();
    Config {
        cases: if set("PROPTEST_CASES") { from_env.cases } else { cases },
        rng_seed: if set("PROPTEST_RNG_SEED") { from_env.rng_seed } else { RngSeed::Fixed(SEED) },
        rng_algorithm: RngAlgorithm::ChaCha,
        failure_persistence: None,
        // Shrinking a failure on a loaded machine must not run for minutes.
        max_shrink_time: 20_000,
        ..from_env
    }
}

/// Checks an error message for what every refusal of bad input must give: one non-empty line.
pub fn assert_clear(message: &str) {
    assert!(!message.trim().is_empty(), "an empty error message");
    assert!(!message.contains('\n'), "a message on more than one line: {message:?}");
}
