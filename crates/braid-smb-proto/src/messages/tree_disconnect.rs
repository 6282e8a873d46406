//! MS-SMB2 2.2.11 / 2.2.12: SMB2 TREE_DISCONNECT request and response.

use super::wire::empty_message;

empty_message!(
    /// MS-SMB2 2.2.11
    TreeDisconnectRequest, 4, 2
);
empty_message!(
    /// MS-SMB2 2.2.12
    TreeDisconnectResponse, 4, 2
);

#[cfg(test)]
mod tests {
    use super::super::wire::test_util::*;
    use super::*;

    #[test]
    fn round_trips() {
        assert_eq!(round_trip(&TreeDisconnectRequest).len(), 68);
        assert_eq!(round_trip(&TreeDisconnectResponse).len(), 68);
    }
}
