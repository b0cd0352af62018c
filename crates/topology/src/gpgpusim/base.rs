//! The base configuration and the option and cache-string syntax of GPGPU-Sim.

/// A base configuration: a `gpgpusim.config` whose options memtopo does not measure are
/// kept.
#[derive(Debug, Clone, Default)]
pub struct Base {
    pub(super) lines: Vec<String>,
}

impl Base {
    /// Reads a configuration's text.
    pub fn parse(text: &str) -> Base {
        Base {
            lines: text.lines().map(str::to_owned).collect(),
        }
    }

    /// The value of `option` (the last line that sets it, without a trailing comment).
    pub fn get(&self, option: &str) -> Option<&str> {
        self.lines.iter().rev().find_map(|line| {
            let (name, value) = option_line(line)?;
            (name == option).then_some(value)
        })
    }

    pub(super) fn get_u64(&self, option: &str) -> Option<u64> {
        self.get(option)?.parse().ok()
    }
}

/// `(name, value)` of an option line (`-name value  # comment`).
pub(super) fn option_line(line: &str) -> Option<(&str, &str)> {
    let line = line.trim_start();
    if !line.starts_with('-') {
        return None;
    }
    let line = line.split('#').next().unwrap_or(line).trim_end();
    let (name, value) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    Some((name, value.trim()))
}

/// A cache string's head fields (`S`, `4`, `128`, `64`) and the rest from its first comma
/// (`,L:T:m:L:L,A:512:8,16:0,32`); `None` for `none` or a malformed string.
pub(super) fn cache_string(value: &str) -> Option<(Vec<&str>, &str)> {
    let comma = value.find(',')?;
    let fields: Vec<&str> = value[..comma].split(':').collect();
    (fields.len() == 4).then(|| (fields, &value[comma..]))
}
