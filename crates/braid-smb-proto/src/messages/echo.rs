//! MS-SMB2 2.2.28 / 2.2.29: SMB2 ECHO request and response.

use super::wire::empty_message;

empty_message!(
    /// MS-SMB2 2.2.28
    EchoRequest, 4, 2
);
empty_message!(
    /// MS-SMB2 2.2.29
    EchoResponse, 4, 2
);

#[cfg(test)]
mod tests {
    use super::super::wire::test_util::*;
    use super::*;

    #[test]
    fn round_trips() {
        assert_eq!(round_trip(&EchoRequest).len(), 68);
        assert_eq!(round_trip(&EchoResponse).len(), 68);
    }
}
