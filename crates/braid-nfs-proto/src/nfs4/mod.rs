//! NFSv4.1 (and the NFSv4.2 additions) types and codecs: the generated
//! types of the .x (`generated`), the hand-written READDIR list
//! (`readdir`), attribute (de)serialisation (`attr`) and COMPOUND decoding
//! (`compound`).

#[allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    clippy::upper_case_acronyms,
    clippy::large_enum_variant,
    clippy::enum_variant_names,
    clippy::unreadable_literal,
    clippy::match_single_binding,
    clippy::single_match,
    clippy::let_and_return,
    clippy::needless_borrow,
    missing_docs
)]
mod generated;
#[allow(non_camel_case_types)]
mod readdir;

pub mod attr;
pub mod compound;

pub use generated::*;
pub use readdir::*;
