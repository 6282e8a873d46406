pub mod dummy {}
