//! placeholder while the workspace is assembled
