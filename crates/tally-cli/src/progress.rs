//! A progress bar for long loads: shown on a terminal only, and only once a
//! load has taken more than a second.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Reports bytes read; draws nothing until a second has passed.
pub struct Progress {
    start: Instant,
    total: Option<u64>,
    bar: Option<ProgressBar>,
    enabled: bool,
}

impl Progress {
    /// A progress reporter for inputs of `total` bytes (if known).
    pub fn new(total: Option<u64>) -> Self {
        Progress {
            start: Instant::now(),
            total,
            bar: None,
            enabled: std::io::stderr().is_terminal(),
        }
    }

    /// Called by readers with the bytes consumed so far.
    pub fn update(&mut self, bytes: u64) {
        if !self.enabled {
            return;
        }
        if self.bar.is_none() {
            if self.start.elapsed() < Duration::from_secs(1) {
                return;
            }
            let bar = match self.total {
                Some(t) => ProgressBar::with_draw_target(Some(t), ProgressDrawTarget::stderr())
                    .with_style(
                        ProgressStyle::with_template(
                            "{spinner} reading {bytes}/{total_bytes} {msg}",
                        )
                        .expect("valid template"),
                    ),
                None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
                    .with_style(
                        ProgressStyle::with_template("{spinner} reading {bytes} {msg}")
                            .expect("valid template"),
                    ),
            };
            self.bar = Some(bar);
        }
        if let Some(b) = &self.bar {
            // The rate over the whole load: indicatif's estimate would start
            // only when the bar appears, a second and many bytes late.
            let secs = self.start.elapsed().as_secs_f64();
            let rate = bytes as f64 / secs.max(1e-3);
            let mut msg = format!("({}/s", indicatif::HumanBytes(rate as u64));
            if let Some(t) = self.total.filter(|&t| t > bytes) {
                msg.push_str(&format!(
                    ", {:.0}s left",
                    (t - bytes) as f64 / rate.max(1.0)
                ));
            }
            msg.push(')');
            b.set_position(bytes);
            b.set_message(msg);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}
