//! Integration tests of the `topology` crate (one binary, topic modules).

mod clusters;
mod copies;
mod diff;
mod fixtures;
mod fleet;
mod formats;
mod golden;
mod gpgpusim;
mod html;
mod mt4g;
mod proptests;
mod raw;
mod run_record;
mod schema;
mod sections;
mod validation;
