//! `secrecy::Secret<T>` as a bind value (feature `secrecy`, secrecy 0.8, as
//! the official driver's `secrecy-08`): written exactly as the `T` it wraps,
//! so that a password or token can be bound without first being taken out
//! of its wrapper (where it would be printed by a `Debug` and left in
//! memory after use). Reading one back is not offered, as officially: a
//! secret read from a row is read as its type and wrapped by the caller.

use bytes::BufMut;
use secrecy::{ExposeSecret, Secret, Zeroize};

use crate::error::EncodeError;
use crate::types::ser::SerializeValue;
use crate::types::ColumnType;

impl<T: SerializeValue + Zeroize> SerializeValue for Secret<T> {
    fn check_type(&self, typ: &ColumnType) -> Result<(), EncodeError> {
        self.expose_secret().check_type(typ)
    }
    fn encoded_len(&self) -> Result<usize, EncodeError> {
        self.expose_secret().encoded_len()
    }
    fn encode(&self, buf: &mut impl BufMut) {
        self.expose_secret().encode(buf)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Written byte for byte as the value it wraps, checked as it is.
    #[test]
    fn a_secret_is_written_as_its_value() {
        let secret = Secret::new(String::from("hunter2"));
        let plain = String::from("hunter2");
        assert_eq!(secret.encoded_len().unwrap(), plain.encoded_len().unwrap());
        let (mut a, mut b) = (Vec::new(), Vec::new());
        secret.encode(&mut a);
        plain.encode(&mut b);
        assert_eq!(a, b);
        assert!(secret.check_type(&ColumnType::Text).is_ok());
        assert!(secret.check_type(&ColumnType::Int).is_err(), "checked as a string");
        assert!(!format!("{secret:?}").contains("hunter2"), "its Debug still hides it");
    }
}
