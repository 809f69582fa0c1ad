//! The shared test machinery of the file systems on persistent memory.
