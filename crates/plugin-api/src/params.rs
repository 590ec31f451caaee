//! Plugin parameters: a string map (from `cuzk.toml` or flags) handed over at
//! instantiation. A plugin declares its parameters with defaults; a key it does not
//! declare is an error, so a typo in a config never silently runs the default.

use std::str::FromStr;

use abi_stable::std_types::RStr;
use abi_stable::StableAbi;

use crate::{AbiError, ErrorCode};

/// One `key = value` pair given to a plugin.
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug)]
pub struct Param<'a> {
    pub key: RStr<'a>,
    pub value: RStr<'a>,
}

impl<'a> Param<'a> {
    pub fn new(key: &'a str, value: &'a str) -> Self {
        Self {
            key: key.into(),
            value: value.into(),
        }
    }
}

/// A parameter a plugin declares: its name, its default (as text) and what it does.
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug)]
pub struct ParamDoc {
    pub name: RStr<'static>,
    pub default: RStr<'static>,
    pub help: RStr<'static>,
}

impl ParamDoc {
    pub const fn new(name: &'static str, default: &'static str, help: &'static str) -> Self {
        Self {
            name: RStr::from_str(name),
            default: RStr::from_str(default),
            help: RStr::from_str(help),
        }
    }
}

/// The given parameters, checked against the declared ones (plugin side).
#[derive(Debug)]
pub struct Params<'a> {
    given: &'a [Param<'a>],
    declared: &'static [ParamDoc],
}

impl<'a> Params<'a> {
    /// Fails on a key that is not declared, or given twice.
    pub fn new(given: &'a [Param<'a>], declared: &'static [ParamDoc]) -> Result<Self, AbiError> {
        for (i, p) in given.iter().enumerate() {
            if !declared.iter().any(|d| d.name == p.key) {
                let known: Vec<&str> = declared.iter().map(|d| d.name.as_str()).collect();
                let known = if known.is_empty() {
                    "it takes none".to_string()
                } else {
                    format!("known: {}", known.join(", "))
                };
                return Err(AbiError::new(
                    ErrorCode::UNKNOWN_PARAMETER,
                    format!("unknown parameter `{}` ({known})", p.key),
                ));
            }
            if given[..i].iter().any(|q| q.key == p.key) {
                return Err(AbiError::new(
                    ErrorCode::INVALID_PARAMETER,
                    format!("parameter `{}` is given twice", p.key),
                ));
            }
        }
        Ok(Self { given, declared })
    }

    /// The value of `name` as text: the given one, else the declared default, else ""
    /// (a name the plugin did not declare).
    pub fn text(&self, name: &str) -> &str {
        if let Some(p) = self.given.iter().find(|p| p.key == name) {
            return p.value.as_str();
        }
        self.declared
            .iter()
            .find(|d| d.name == name)
            .map_or("", |d| d.default.as_str())
    }

    /// The value of `name` parsed as `T`.
    pub fn get<T>(&self, name: &str) -> Result<T, AbiError>
    where
        T: FromStr,
        T::Err: std::fmt::Display,
    {
        let text = self.text(name);
        text.trim().parse::<T>().map_err(|e| {
            AbiError::new(
                ErrorCode::INVALID_PARAMETER,
                format!("parameter `{name}` = `{text}` is not valid: {e}"),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DECLARED: &[ParamDoc] = &[
        ParamDoc::new("depth", "4", "queue depth"),
        ParamDoc::new("name", "x", "a label"),
    ];

    #[test]
    fn params_check_keys_and_parse_values() {
        let given = [Param::new("depth", " 16 ")];
        let p = Params::new(&given, DECLARED).unwrap();
        assert_eq!(p.get::<usize>("depth").unwrap(), 16);
        assert_eq!(p.text("name"), "x", "an absent parameter takes its default");

        let bad = [Param::new("depht", "1")];
        let e = Params::new(&bad, DECLARED).unwrap_err();
        assert_eq!(e.code, ErrorCode::UNKNOWN_PARAMETER);
        assert!(
            e.message.contains("`depht`") && e.message.contains("depth, name"),
            "{e}"
        );

        let e = Params::new(&bad, &[]).unwrap_err();
        assert!(e.message.contains("takes none"), "{e}");

        let twice = [Param::new("depth", "1"), Param::new("depth", "2")];
        assert_eq!(
            Params::new(&twice, DECLARED).unwrap_err().code,
            ErrorCode::INVALID_PARAMETER
        );

        let nan = [Param::new("depth", "many")];
        let e = Params::new(&nan, DECLARED)
            .unwrap()
            .get::<usize>("depth")
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_PARAMETER);
        assert!(e.message.contains("`depth` = `many`"), "{e}");
    }
}
