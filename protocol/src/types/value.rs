//! The owned, dynamically typed [`CqlValue`] and the value types that have no
//! natural std equivalent (date, time, timestamp, duration, decimal, varint).
