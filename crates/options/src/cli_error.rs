//! The error a command of the binary ends with, and the exit code it maps to: 2 for bad usage or
//! bad input (a flag, a file, an object the user gave), 1 for a failure while running. `simulate`
//! and `bench` (the simulator) and `run` and `plan` (the binary) all return it; it lives here,
//! beside the reading of the user's input, so that both import it from the crate below them. It
//! decides the exit code only and never prints.

/// A failure of a command, with the exit code it maps to.
#[derive(Debug)]
pub struct CliError {
    code: u8,
    error: anyhow::Error,
}

impl CliError {
    /// Bad usage or bad input (a flag, a file, an object, an output path that cannot be
    /// written): exit code 2.
    pub fn usage(error: anyhow::Error) -> CliError {
        CliError { code: 2, error }
    }

    /// A failure while running (the controller stopped with an error): exit code 1.
    pub fn failure(error: anyhow::Error) -> CliError {
        CliError { code: 1, error }
    }

    /// The process exit code.
    pub fn exit_code(&self) -> u8 {
        self.code
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_2_failure_is_1_and_the_causes_are_shown() {
        let e = CliError::usage(anyhow::anyhow!("cause").context("--report x: cannot create"));
        assert_eq!(e.exit_code(), 2);
        assert_eq!(e.to_string(), "--report x: cannot create: cause");
        assert_eq!(CliError::failure(anyhow::anyhow!("stopped")).exit_code(), 1);
    }
}
