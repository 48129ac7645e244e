//! `#[derive(SerializeValues)]`: bind markers matched by name (the
//! default) or by position (`flavor = "in_order"`).

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{parse_quote, DeriveInput, WhereClause};

use crate::attrs::{lit, Field, Flavor, Input};

/// `ast`'s where clause, with each sent field of a generic type bound by
/// `SerializeValue` (the `ser` module's path).
pub(crate) fn serializable(ast: &DeriveInput, input: &Input, ser: &TokenStream) -> WhereClause {
    let (_, _, where_clause) = ast.generics.split_for_impl();
    let mut where_clause: WhereClause = where_clause.cloned().unwrap_or_else(|| parse_quote!(where));
    for f in input.active().filter(|f| input.is_generic(&f.ty)) {
        let ty = &f.ty;
        where_clause.predicates.push(parse_quote!(#ty: #ser::SerializeValue));
    }
    where_clause
}

pub(crate) fn derive(ast: &DeriveInput) -> syn::Result<TokenStream> {
    let input = Input::parse(ast, "SerializeValues")?;
    let krate = &input.attrs.krate;
    let ser = quote!(#krate::types::ser);
    let name = &ast.ident;
    let (impl_generics, ty_generics, _) = ast.generics.split_for_impl();
    let where_clause = serializable(ast, &input, &ser);

    let fields: Vec<_> = input.active().collect();
    let n = fields.len();
    let lens = fields.iter().map(|f| {
        let (ty, ident) = (&f.ty, &f.ident);
        quote_spanned!(ty.span()=> .saturating_add(<#ty as #ser::SerializeValue>::encoded_len(&self.#ident)?))
    });
    let encodes = fields.iter().map(|f| {
        let (ty, ident) = (&f.ty, &f.ident);
        quote_spanned!(ty.span()=> <#ty as #ser::SerializeValue>::encode(&self.#ident, __buf);)
    });
    let buf = if n == 0 { format_ident!("_buf") } else { format_ident!("__buf") };

    let (check_types, encode_for) = match input.attrs.flavor {
        Flavor::ByName => by_name(&input, &fields),
        Flavor::InOrder => (in_order(&input, &fields), quote!()),
    };
    let in_marker = (n > 0).then(|| {
        quote! {
            #[allow(dead_code)]
            fn __in_marker(
                e: #krate::EncodeError,
                spec: &#krate::types::ColumnSpec,
            ) -> #krate::EncodeError {
                #krate::types::derived::in_marker(e, spec)
            }
        }
    });

    Ok(quote! {
        #[automatically_derived]
        impl #impl_generics #ser::SerializeValues for #name #ty_generics #where_clause {
            fn count(&self) -> usize {
                #n
            }
            fn with_names(&self) -> bool {
                false
            }
            fn check_types(
                &self,
                specs: &[#krate::types::ColumnSpec],
            ) -> ::core::result::Result<(), #krate::EncodeError> {
                #in_marker
                #check_types
            }
            fn encoded_len(&self) -> ::core::result::Result<usize, #krate::EncodeError> {
                ::core::result::Result::Ok(0usize #(#lens)*)
            }
            fn encode(&self, #buf: &mut impl #krate::bytes::BufMut) {
                #(#encodes)*
            }
            #encode_for
        }
    })
}

/// `check_types` and `encode_for` of a struct matched to the bind markers
/// by name: each marker takes the field of its name, in the markers' order.
fn by_name(input: &Input<'_>, fields: &[&Field]) -> (TokenStream, TokenStream) {
    let krate = &input.attrs.krate;
    let ser = quote!(#krate::types::ser);
    let derived = quote!(#krate::types::derived);
    let n = fields.len();
    let names: Vec<_> = fields.iter().map(|f| lit(&f.name)).collect();
    let indexes: Vec<_> = (0..n).collect();
    let checks = fields.iter().enumerate().map(|(i, f)| {
        let (ty, ident) = (&f.ty, &f.ident);
        quote_spanned! {ty.span()=>
            #i => <#ty as #ser::SerializeValue>::check_type(&self.#ident, &spec.typ)
                .map_err(|e| __in_marker(e, spec))?,
        }
    });
    if n == 0 {
        let check_types = quote! {
            match specs.first() {
                ::core::option::Option::Some(spec) => {
                    ::core::result::Result::Err(#derived::no_field_for_marker::<Self>(specs, &spec.name))
                }
                ::core::option::Option::None => ::core::result::Result::Ok(()),
            }
        };
        return (check_types, quote!());
    }
    let check_types = quote! {
        let mut __seen = [false; #n];
        for spec in specs {
            let __i: usize = match spec.name.as_str() {
                #(#names => #indexes,)*
                __other => {
                    return ::core::result::Result::Err(#derived::no_field_for_marker::<Self>(specs, __other));
                }
            };
            if ::core::mem::replace(&mut __seen[__i], true) {
                return ::core::result::Result::Err(#derived::duplicate_marker::<Self>(specs, &spec.name));
            }
            match __i {
                #(#checks)*
                _ => {}
            }
        }
        const __NAMES: [&str; #n] = [#(#names),*];
        for (__name, __found) in __NAMES.iter().zip(__seen) {
            if !__found {
                return ::core::result::Result::Err(#derived::no_marker_for_field::<Self>(specs, __name));
            }
        }
        ::core::result::Result::Ok(())
    };
    let encodes = fields.iter().map(|f| {
        let (ty, ident, name) = (&f.ty, &f.ident, lit(&f.name));
        quote_spanned!(ty.span()=> #name => <#ty as #ser::SerializeValue>::encode(&self.#ident, __buf),)
    });
    let encode_for = quote! {
        fn encode_for(&self, specs: &[#krate::types::ColumnSpec], __buf: &mut impl #krate::bytes::BufMut) {
            // Exactly the fields' bytes must be written: unless each marker
            // names a field and each field one marker (what `check_types`
            // accepts), the fields go in their own order.
            if specs.len() != #n {
                return #ser::SerializeValues::encode(self, __buf);
            }
            let mut __seen = [false; #n];
            for spec in specs {
                let __i: usize = match spec.name.as_str() {
                    #(#names => #indexes,)*
                    _ => return #ser::SerializeValues::encode(self, __buf),
                };
                if ::core::mem::replace(&mut __seen[__i], true) {
                    return #ser::SerializeValues::encode(self, __buf);
                }
            }
            for spec in specs {
                match spec.name.as_str() {
                    #(#encodes)*
                    _ => {}
                }
            }
        }
    };
    (check_types, encode_for)
}

/// `check_types` of a struct whose fields are the bind markers in order:
/// the count and each field's type; names are not matched, but a struct
/// whose fields carry the markers' names in another order is refused.
fn in_order(input: &Input<'_>, fields: &[&Field]) -> TokenStream {
    let krate = &input.attrs.krate;
    let ser = quote!(#krate::types::ser);
    let name = &input.ast.ident;
    let n = fields.len();
    let specs: Vec<_> = (0..n).map(|i| format_ident!("__spec{}", i)).collect();
    let names: Vec<_> = fields.iter().map(|f| lit(&f.name)).collect();
    let checks = fields.iter().zip(&specs).map(|(f, spec)| {
        let (ty, ident) = (&f.ty, &f.ident);
        quote_spanned! {ty.span()=>
            <#ty as #ser::SerializeValue>::check_type(&self.#ident, &#spec.typ)
                .map_err(|e| __in_marker(e, #spec))?;
        }
    });
    // Values are sent in field order: a struct whose fields carry the bind
    // markers' names in another order is almost surely a mistake.
    let order_check = (n >= 2).then(|| {
        let what = lit(&format!("bind values from struct `{name}`"));
        let field_list: Vec<_> = fields.iter().map(|f| f.name.as_str()).collect();
        let reason = lit(&format!(
            "the fields match the bind markers by name but not in order, and \
             flavor = \"in_order\" sends them in field order (fields: {})",
            field_list.join(", ")
        ));
        quote! {
            const __NAMES: [&str; #n] = [#(#names),*];
            if specs.iter().zip(__NAMES).any(|(s, n)| s.name != n)
                && __NAMES.iter().all(|n| specs.iter().any(|s| s.name == *n))
            {
                return ::core::result::Result::Err(#krate::EncodeError::InvalidValue {
                    what: #what,
                    reason: #reason,
                });
            }
        }
    });
    quote! {
        let [#(#specs),*] = specs else {
            return ::core::result::Result::Err(#krate::EncodeError::InvalidValue {
                what: "bind values",
                reason: "the number of values differs from the number of bind markers",
            });
        };
        #order_check
        #(#checks)*
        ::core::result::Result::Ok(())
    }
}
