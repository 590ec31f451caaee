//! Progress display for work that takes more than a moment.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A spinner with a message, ticking on its own thread; hidden when stderr is not
/// a terminal (logs stay clean).
pub fn spinner(msg: impl Into<String>) -> ProgressBar {
    let pb = ProgressBar::new_spinner();
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.set_message(msg.into());
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}

/// A bar over `len` steps.
pub fn bar(len: u64, msg: impl Into<String>) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} [{elapsed} < {eta}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb.set_message(msg.into());
    pb.enable_steady_tick(Duration::from_millis(250));
    pb
}
