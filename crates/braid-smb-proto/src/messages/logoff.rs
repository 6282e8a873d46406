//! MS-SMB2 2.2.7 / 2.2.8: SMB2 LOGOFF request and response.

use super::wire::empty_message;

empty_message!(
    /// MS-SMB2 2.2.7
    LogoffRequest, 4, 2
);
empty_message!(
    /// MS-SMB2 2.2.8
    LogoffResponse, 4, 2
);

#[cfg(test)]
mod tests {
    use super::super::wire::test_util::*;
    use super::*;

    #[test]
    fn round_trips() {
        assert_eq!(round_trip(&LogoffRequest).len(), 68);
        assert_eq!(round_trip(&LogoffResponse).len(), 68);
    }
}
