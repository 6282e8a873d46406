//! MS-SMB2 2.2.30: SMB2 CANCEL request (there is no response).

use super::wire::empty_message;

empty_message!(
    /// MS-SMB2 2.2.30. The request to cancel is named by the header's
    /// MessageId (or AsyncId), not by the body.
    CancelRequest, 4, 2
);

#[cfg(test)]
mod tests {
    use super::super::wire::test_util::*;
    use super::*;

    #[test]
    fn round_trips() {
        assert_eq!(round_trip(&CancelRequest).len(), 68);
    }
}
