//! What validation says of one object: errors and warnings, collected with their field paths.

use crate::config::{ConfigError, ObjectRef};
use std::fmt;

/// A problem that does not make an object invalid: an admission warning as istiod returns it, or a
/// field Rudder accepts but does not yet act on (`unhonoured`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub object: ObjectRef,
    pub field: String,
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.object, self.message)
        } else {
            write!(f, "{}: {}: {}", self.object, self.field, self.message)
        }
    }
}

/// Everything validation has to say about one object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    /// Any error makes the object invalid: it is denied, or its file rejected.
    pub errors: Vec<ConfigError>,
    pub warnings: Vec<Warning>,
}

/// Errors (and warnings) kept per object; past it they are counted in one last message. An object
/// with a million faulty fields must cost a million checks, not a million messages.
const MAX_MESSAGES: usize = 100;

/// Collects errors and warnings for one object; `path` strings use Istio's camelCase field names.
pub struct Report<'a> {
    object: &'a ObjectRef,
    pub errors: Vec<ConfigError>,
    pub warnings: Vec<Warning>,
    errors_left_out: usize,
    warnings_left_out: usize,
}

impl<'a> Report<'a> {
    pub fn new(object: &'a ObjectRef) -> Self {
        Report {
            object,
            errors: Vec::new(),
            warnings: Vec::new(),
            errors_left_out: 0,
            warnings_left_out: 0,
        }
    }

    /// True once the object has as many errors as are reported: a costly check may stop early.
    pub fn errors_full(&self) -> bool {
        self.errors.len() >= MAX_MESSAGES
    }

    /// What the report says, with a last message for what was left out.
    pub(super) fn into_verdict(mut self) -> Verdict {
        if self.errors_left_out > 0 {
            self.errors.push(ConfigError::Invalid {
                object: self.object.clone(),
                field: "spec".into(),
                message: format!("and {} more errors", self.errors_left_out),
            });
        }
        if self.warnings_left_out > 0 {
            self.warnings.push(Warning {
                object: self.object.clone(),
                field: "spec".into(),
                message: format!("and {} more warnings", self.warnings_left_out),
            });
        }
        Verdict {
            errors: self.errors,
            warnings: self.warnings,
        }
    }

    /// An admission warning: the object is accepted, and the user is told.
    pub fn warn(&mut self, path: impl Into<String>, message: impl Into<String>) {
        if self.warnings.len() >= MAX_MESSAGES {
            self.warnings_left_out += 1;
            return;
        }
        self.warnings.push(Warning {
            object: self.object.clone(),
            field: path.into(),
            message: message.into(),
        });
    }

    pub fn error(&mut self, path: impl Into<String>, message: impl Into<String>) {
        if self.errors_full() {
            self.errors_left_out += 1;
            return;
        }
        self.errors.push(ConfigError::Invalid {
            object: self.object.clone(),
            field: path.into(),
            message: message.into(),
        });
    }

    /// Records `result`'s error, if any, at `path`.
    pub fn check(&mut self, path: impl Into<String>, result: Result<(), String>) {
        if let Err(message) = result {
            self.error(path, message);
        }
    }
}
