//! What the analysis commands show people: ports as given on the command line, focusing a
//! matrix, and its renderings (table, summary, Graphviz, HTML), for pods and for Services.

pub mod dot;
pub mod focus;
pub mod html;
pub mod ports;
pub mod service_summary;
pub mod service_view;
pub mod summary;
pub mod table;
pub mod view;
