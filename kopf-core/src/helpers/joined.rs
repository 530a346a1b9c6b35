//! Short texts joined on the stack, without an allocation of their own.

/// Texts joined in a buffer of `N` bytes.
pub(crate) struct Joined<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> Joined<N> {
    /// `parts` joined, if they fit in `N` bytes.
    pub(crate) fn new(parts: &[&str]) -> Option<Joined<N>> {
        let mut joined = Joined {
            bytes: [0; N],
            len: 0,
        };
        for part in parts {
            let end = joined.len + part.len();
            joined
                .bytes
                .get_mut(joined.len..end)?
                .copy_from_slice(part.as_bytes());
            joined.len = end;
        }
        Some(joined)
    }

    pub(crate) fn as_str(&self) -> &str {
        // Only whole `str`s were copied in: always valid.
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_joined_when_they_fit_and_refused_when_they_do_not() {
        let joined = Joined::<8>::new(&["ab", "", "cdé"]).map(|joined| joined.as_str().to_owned());
        assert_eq!(joined.as_deref(), Some("abcdé"));
        assert!(Joined::<8>::new(&["abcd", "efghi"]).is_none());
        assert_eq!(Joined::<0>::new(&[]).map(|joined| joined.len), Some(0));
    }
}
