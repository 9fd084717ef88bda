//! The name, label, port-name and CIDR validators agree with the API server's rules
//! (reference implementations of k8s.io/apimachinery's validation in the fuzz crate).
#![no_main]

use libfuzzer_sys::fuzz_target;
use palisade_fuzz as r;
use palisade_model::validate as v;

fuzz_target!(|input: (u8, String)| {
    let (which, s) = input;
    let s = s.as_str();
    match which % 6 {
        0 => assert_eq!(
            v::dns_label(s).is_none(),
            r::ref_dns_label(s),
            "dns_label({s:?})"
        ),
        1 => assert_eq!(
            v::dns_subdomain(s).is_none(),
            r::ref_dns_subdomain(s),
            "dns_subdomain({s:?})"
        ),
        2 => assert_eq!(
            v::qualified_name(s).is_none(),
            r::ref_qualified_name(s),
            "qualified_name({s:?})"
        ),
        3 => assert_eq!(
            v::label_value(s).is_none(),
            r::ref_label_value(s),
            "label_value({s:?})"
        ),
        4 => assert_eq!(
            v::port_name(s).is_none(),
            r::ref_port_name(s),
            "port_name({s:?})"
        ),
        _ => {
            let parsed = v::parse_cidr(s);
            if let Some(want) = r::ref_cidr_shape(s) {
                assert_eq!(parsed.is_ok(), want, "parse_cidr({s:?}) = {parsed:?}");
            }
            if let Ok(net) = parsed {
                assert_eq!(net, net.trunc(), "host bits are cleared");
                assert_eq!(
                    v::parse_cidr(&net.to_string()),
                    Ok(net),
                    "a parsed CIDR re-parses"
                );
            }
        }
    }
});
