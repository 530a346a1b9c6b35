//! Admission webhooks called as kube-apiserver calls them: the chain of one write
//! (`chain`), and the HTTPS call of one webhook (`calling`). What to call and what the
//! answers mean is `semantics::webhooks`.

mod calling;
mod chain;

pub(crate) use chain::Admission;
