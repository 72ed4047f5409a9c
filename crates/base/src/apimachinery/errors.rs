//! Errors as Go's `error` interface carries them across a boundary (`BoxError`), and
//! `k8s.io/apimachinery/pkg/util/errors`' `Aggregate`: several errors of one step as one, each
//! kept whole so that a caller can still find an API error's kind inside (client-go's
//! `errors.As` through an aggregate).

use std::fmt;

/// Any error, with its source chain intact: what a layer hands to one that only reports it or
/// looks inside it for a kind (the controller harness, a constructor's caller), as Go's `error`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// `utilerrors.NewAggregate`: the errors of several independent steps (e.g. one per pod of a
/// batch), reported as one. Build it with [`Aggregate::from_errors`], which gives `Ok` for none.
#[derive(Debug)]
pub struct Aggregate {
    errors: Vec<BoxError>,
}

impl Aggregate {
    /// `Ok(())` for no error, otherwise every error as one (`NewAggregate` returns nil for an
    /// empty list).
    pub fn from_errors<E: Into<BoxError>>(errors: impl IntoIterator<Item = E>) -> Result<(), Aggregate> {
        let errors: Vec<BoxError> = errors.into_iter().map(Into::into).collect();
        if errors.is_empty() { Ok(()) } else { Err(Aggregate { errors }) }
    }

    /// The errors, in the order they were given; never empty.
    pub fn errors(&self) -> &[BoxError] {
        &self.errors
    }
}

/// As `aggregate.Error()`: one error alone as itself; several, with nested aggregates' members
/// in their place and each message once, as `[a, b]` (or bare when one message remains).
impl fmt::Display for Aggregate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let [one] = self.errors.as_slice() {
            return write!(f, "{one}");
        }
        let mut seen: Vec<String> = Vec::new();
        self.visit(&mut |error| {
            let message = error.to_string();
            if !seen.contains(&message) {
                seen.push(message);
            }
        });
        match seen.as_slice() {
            [one] => f.write_str(one),
            many => write!(f, "[{}]", many.join(", ")),
        }
    }
}

impl Aggregate {
    /// `aggregate.visit`: every member, a nested aggregate's members in its place (one level,
    /// as upstream's).
    fn visit(&self, visit: &mut dyn FnMut(&(dyn std::error::Error + 'static))) {
        for member in &self.errors {
            match member.downcast_ref::<Aggregate>() {
                Some(nested) => nested.errors.iter().for_each(|e| visit(e.as_ref())),
                None => visit(member.as_ref()),
            }
        }
    }
}

/// The first error is its source, so a plain walk of the chain sees into a one-error aggregate;
/// [`find_in_chain`] looks into every one.
impl std::error::Error for Aggregate {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.errors.first().map(|e| e.as_ref() as &(dyn std::error::Error + 'static))
    }
}

/// Go's `errors.As`: the first error of type `T` in `error`'s source chain, itself included,
/// looking into every member of an [`Aggregate`] (whose `Is`/`As` match any member).
pub fn find_in_chain<'a, T: std::error::Error + 'static>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a T> {
    let mut next = Some(error);
    while let Some(current) = next {
        if let Some(found) = current.downcast_ref::<T>() {
            return Some(found);
        }
        if let Some(aggregate) = current.downcast_ref::<Aggregate>() {
            return aggregate.errors.iter().find_map(|member| find_in_chain::<T>(member.as_ref()));
        }
        next = current.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Marked(u8);

    impl fmt::Display for Marked {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "marked {}", self.0)
        }
    }

    impl std::error::Error for Marked {}

    #[derive(Debug)]
    struct Wrapper(Marked);

    impl fmt::Display for Wrapper {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "wrapping: {}", self.0)
        }
    }

    impl std::error::Error for Wrapper {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn an_aggregate_reads_as_upstream_s() {
        assert!(Aggregate::from_errors(Vec::<BoxError>::new()).is_ok());
        let one = Aggregate::from_errors(["a".to_string()]).unwrap_err();
        assert_eq!(one.to_string(), "a");
        let two = Aggregate::from_errors(["a".to_string(), "b".to_string()]).unwrap_err();
        assert_eq!(two.to_string(), "[a, b]");
        assert_eq!(two.errors().len(), 2);
        // Each message once; one left reads bare, as upstream's.
        let same = Aggregate::from_errors(["a".to_string(), "a".to_string()]).unwrap_err();
        assert_eq!(same.to_string(), "a");
        let repeated = Aggregate::from_errors(["a".to_string(), "b".to_string(), "a".to_string()]).unwrap_err();
        assert_eq!(repeated.to_string(), "[a, b]");
        // A nested aggregate's members stand in its place.
        let inner = Aggregate::from_errors(["b".to_string(), "c".to_string()]).unwrap_err();
        let members: Vec<BoxError> = vec!["a".into(), Box::new(inner)];
        assert_eq!(Aggregate::from_errors(members).unwrap_err().to_string(), "[a, b, c]");
    }

    #[test]
    fn the_chain_is_searched_through_wrappers_and_every_member_of_an_aggregate() {
        let wrapped = Wrapper(Marked(1));
        assert_eq!(find_in_chain::<Marked>(&wrapped), Some(&Marked(1)));
        let members: Vec<BoxError> = vec!["plain".into(), Box::new(Wrapper(Marked(2)))];
        let aggregate = Aggregate::from_errors(members).unwrap_err();
        assert_eq!(find_in_chain::<Marked>(&aggregate), Some(&Marked(2)));
        let plain = Aggregate::from_errors(["plain".to_string()]).unwrap_err();
        assert_eq!(find_in_chain::<Marked>(&plain), None);
    }
}
