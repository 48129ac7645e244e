//! `#[derive(DeserializeRow)]`.

use std::collections::HashSet;

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{parse_quote, DeriveInput, GenericParam, Generics, Lifetime, LifetimeParam, WhereClause};

use crate::attrs::{lit, replace_lifetimes, Field, Flavor, Input};

pub(crate) fn derive(ast: &DeriveInput) -> syn::Result<TokenStream> {
    let input = Input::parse(ast, "DeserializeRow")?;
    let krate = &input.attrs.krate;
    let de = quote!(#krate::types::de);
    let name = &ast.ident;

    let (cg, impl_generics, where_clause) = Gen::new(&input);
    let (impl_generics, _, _) = impl_generics.split_for_impl();
    let (_, ty_generics, _) = ast.generics.split_for_impl();
    let lt = cg.lt.clone();

    let (type_check, deserialize) = match input.attrs.flavor {
        Flavor::ByName => (cg.type_check_by_name(), cg.deserialize_by_name()),
        Flavor::InOrder => (cg.type_check_in_order(), cg.deserialize_in_order()),
    };
    let helpers = cg.helpers();

    Ok(quote! {
        const _: () = {
            #helpers

            #[automatically_derived]
            impl #impl_generics #de::DeserializeRow<#lt> for #name #ty_generics #where_clause {
                fn type_check(
                    specs: &[#krate::types::ColumnSpec],
                ) -> ::core::result::Result<(), #de::TypeCheckError> {
                    #type_check
                }
                fn deserialize(
                    row: #de::ColumnIterator<#lt>,
                ) -> ::core::result::Result<Self, #de::DeserializeError> {
                    #deserialize
                }
            }
        };
    })
}

/// Code generation for one struct read from a frame (a row here, a UDT
/// value in `udt_de`).
pub(crate) struct Gen<'g> {
    pub krate: TokenStream,
    pub de: TokenStream,
    /// The lifetime of the frame.
    pub lt: Lifetime,
    pub input: &'g Input<'g>,
    /// Lifetimes of the struct to replace by `lt` in the types fields are
    /// read as.
    rebind: HashSet<String>,
}

impl<'g> Gen<'g> {
    /// The generator for `input`, the generics of its impl (the struct's,
    /// with the frame's lifetime added when it is not the struct's) and
    /// the impl's where clause (bounds for the fields of generic types).
    pub fn new(input: &'g Input<'g>) -> (Self, Generics, WhereClause) {
        let ast = input.ast;
        let krate = &input.attrs.krate;
        // The lifetime of the frame the value borrows from: the struct's
        // own lifetime when it has exactly one (`struct R<'a> { s: &'a str }`),
        // else a new one. With several, the fields are read with all of them
        // replaced by the frame's (`&'f str`), which outlives each of them.
        let struct_lifetimes: Vec<&Lifetime> = ast.generics.lifetimes().map(|l| &l.lifetime).collect();
        let (lt, impl_generics, rebind): (Lifetime, Generics, HashSet<String>) = if let [only] = struct_lifetimes[..] {
            (only.clone(), ast.generics.clone(), HashSet::new())
        } else {
            let lt = Lifetime::new("'__shardwise_frame", Span::call_site());
            let param: LifetimeParam = if struct_lifetimes.is_empty() {
                LifetimeParam::new(lt.clone())
            } else {
                parse_quote!(#lt: #(#struct_lifetimes)+*)
            };
            let mut g = ast.generics.clone();
            g.params.insert(0, GenericParam::Lifetime(param));
            let rebind = struct_lifetimes.iter().map(|l| l.ident.to_string()).collect();
            (lt, g, rebind)
        };
        let de = quote!(#krate::types::de);
        let cg = Gen { krate: quote!(#krate), de: de.clone(), lt: lt.clone(), input, rebind };
        let (_, _, where_clause) = ast.generics.split_for_impl();
        let mut where_clause: WhereClause = where_clause.cloned().unwrap_or_else(|| parse_quote!(where));
        for f in input.fields.iter().filter(|f| input.is_generic(&f.ty)) {
            let ty = &f.ty;
            where_clause.predicates.push(if f.skip {
                parse_quote!(#ty: ::core::default::Default)
            } else {
                let ty = cg.frame_ty(f);
                parse_quote!(#ty: #de::DeserializeValue<#lt>)
            });
        }
        (cg, impl_generics, where_clause)
    }

    pub fn active(&self) -> Vec<&Field> {
        self.input.active().collect()
    }

    /// The type field `f` is read as: its own, with the lifetimes of
    /// `rebind` replaced by the frame's.
    pub fn frame_ty(&self, f: &Field) -> TokenStream {
        let ty = &f.ty;
        if self.rebind.is_empty() {
            quote!(#ty)
        } else {
            replace_lifetimes(quote!(#ty), &self.rebind, &self.lt)
        }
    }

    /// `<T as DeserializeValue<'lt>>`, spanned at the field's type so that
    /// a missing impl is reported there.
    pub fn value_trait(&self, f: &Field) -> TokenStream {
        let (de, lt) = (&self.de, &self.lt);
        let ty = self.frame_ty(f);
        quote_spanned!(f.ty.span()=> <#ty as #de::DeserializeValue<#lt>>)
    }

    /// `Ok(Self { .. })` from one local per active field, in field order.
    pub fn construct(&self) -> TokenStream {
        let mut active = 0usize;
        let inits = self.input.fields.iter().map(|f| {
            let (ident, ty) = (&f.ident, &f.ty);
            if f.skip {
                quote_spanned!(ty.span()=> #ident: <#ty as ::core::default::Default>::default())
            } else {
                let var = format_ident!("__f{}", active);
                active += 1;
                quote!(#ident: #var)
            }
        });
        quote!(::core::result::Result::Ok(Self { #(#inits),* }))
    }

    /// Private functions shared by the generated methods.
    fn helpers(&self) -> TokenStream {
        let (krate, de) = (&self.krate, &self.de);
        let n = self.active().len();
        let column = quote! {
            /// Names the column a deserialization error happened in.
            #[allow(dead_code)]
            fn __column(
                col: &#de::RawColumn<'_>,
                e: #de::DeserializeError,
            ) -> #de::DeserializeError {
                #de::DeserializeError::Column {
                    index: col.index,
                    name: ::std::clone::Clone::clone(&col.spec.name),
                    source: ::std::boxed::Box::new(e),
                }
            }
            /// A column whose bytes could not be framed.
            #[allow(dead_code)]
            fn __malformed(
                index: usize,
                specs: &[#krate::types::ColumnSpec],
                e: #krate::DecodeError,
            ) -> #de::DeserializeError {
                match specs.get(index) {
                    ::core::option::Option::Some(spec) => #de::DeserializeError::Column {
                        index,
                        name: ::std::clone::Clone::clone(&spec.name),
                        source: ::std::boxed::Box::new(#de::DeserializeError::malformed(&spec.typ, e)),
                    },
                    ::core::option::Option::None => #de::DeserializeError::Malformed {
                        cql_type: ::std::string::String::from("row"),
                        source: e,
                    },
                }
            }
        };
        let common = quote! {
            /// Names the column of a type-check error.
            #[allow(dead_code)]
            fn __in_column(
                mut e: #de::TypeCheckError,
                spec: &#krate::types::ColumnSpec,
            ) -> #de::TypeCheckError {
                e.column = ::core::option::Option::Some(::std::clone::Clone::clone(&spec.name));
                e
            }
            /// The columns of a row, as `name type, ...`.
            #[allow(dead_code)]
            fn __describe(specs: &[#krate::types::ColumnSpec]) -> ::std::string::String {
                let mut out = ::std::string::String::new();
                for (i, spec) in specs.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&spec.name);
                    out.push(' ');
                    out.push_str(&::std::string::ToString::to_string(&spec.typ));
                }
                out
            }
        };
        let flavor = match self.input.attrs.flavor {
            Flavor::ByName => quote! {
                /// The row has no column for a field.
                #[allow(dead_code)]
                fn __missing(
                    rust_type: &'static str,
                    column: &str,
                    specs: &[#krate::types::ColumnSpec],
                ) -> #de::TypeCheckError {
                    #de::TypeCheckError {
                        rust_type,
                        cql_type: ::std::format!(
                            "row with no column named {:?} (columns: {})",
                            column,
                            __describe(specs),
                        ),
                        column: ::core::option::Option::Some(::std::string::ToString::to_string(column)),
                    }
                }
                /// The row has a column no field reads.
                #[allow(dead_code)]
                fn __extra(
                    rust_type: &'static str,
                    spec: &#krate::types::ColumnSpec,
                ) -> #de::TypeCheckError {
                    #de::TypeCheckError {
                        rust_type,
                        cql_type: ::std::format!(
                            "row with column {:?} of type {}, which no field reads",
                            spec.name,
                            spec.typ,
                        ),
                        column: ::core::option::Option::Some(::std::clone::Clone::clone(&spec.name)),
                    }
                }
                /// The row has two columns of the same name.
                #[allow(dead_code)]
                fn __duplicate(
                    rust_type: &'static str,
                    spec: &#krate::types::ColumnSpec,
                ) -> #de::TypeCheckError {
                    #de::TypeCheckError {
                        rust_type,
                        cql_type: ::std::format!("row with two columns named {:?}", spec.name),
                        column: ::core::option::Option::Some(::std::clone::Clone::clone(&spec.name)),
                    }
                }
            },
            Flavor::InOrder => quote! {
                /// The row has another number of columns than the struct
                /// has fields.
                #[allow(dead_code)]
                fn __count(
                    rust_type: &'static str,
                    specs: &[#krate::types::ColumnSpec],
                ) -> #de::TypeCheckError {
                    #de::TypeCheckError {
                        rust_type,
                        cql_type: ::std::format!(
                            "row of {} columns ({}), {} expected",
                            specs.len(),
                            __describe(specs),
                            #n,
                        ),
                        column: ::core::option::Option::None,
                    }
                }
            },
        };
        // Not every struct needs every helper (one without fields reads no
        // column).
        quote!(#column #common #flavor)
    }

    fn type_check_by_name(&self) -> TokenStream {
        let active = self.active();
        if active.is_empty() {
            return quote! {
                match specs.first() {
                    ::core::option::Option::Some(spec) => ::core::result::Result::Err(
                        __extra(::core::any::type_name::<Self>(), spec),
                    ),
                    ::core::option::Option::None => ::core::result::Result::Ok(()),
                }
            };
        }
        let n = active.len();
        let arms = active.iter().enumerate().map(|(i, f)| {
            let name = lit(&f.name);
            let value = self.value_trait(f);
            quote! {
                #name => {
                    if __seen[#i] {
                        return ::core::result::Result::Err(__duplicate(__rust_type, spec));
                    }
                    __seen[#i] = true;
                    #value::type_check(&spec.typ).map_err(|e| __in_column(e, spec))?;
                }
            }
        });
        let missing = active.iter().enumerate().map(|(i, f)| {
            let name = lit(&f.name);
            quote! {
                if !__seen[#i] {
                    return ::core::result::Result::Err(__missing(__rust_type, #name, specs));
                }
            }
        });
        quote! {
            let __rust_type = ::core::any::type_name::<Self>();
            let mut __seen = [false; #n];
            let mut __extra_column = ::core::option::Option::None;
            for spec in specs {
                match spec.name.as_str() {
                    #(#arms)*
                    _ => {
                        if __extra_column.is_none() {
                            __extra_column = ::core::option::Option::Some(spec);
                        }
                    }
                }
            }
            #(#missing)*
            match __extra_column {
                ::core::option::Option::Some(spec) => {
                    ::core::result::Result::Err(__extra(__rust_type, spec))
                }
                ::core::option::Option::None => ::core::result::Result::Ok(()),
            }
        }
    }

    fn deserialize_by_name(&self) -> TokenStream {
        let de = &self.de;
        let active = self.active();
        let construct = self.construct();
        if active.is_empty() {
            return quote! {
                let mut row = row;
                let __start = row.specs().len() - row.columns_remaining();
                match row.next() {
                    ::core::option::Option::Some(::core::result::Result::Ok(col)) => {
                        let e = __extra(::core::any::type_name::<Self>(), col.spec);
                        ::core::result::Result::Err(#de::DeserializeError::TypeCheck(e))
                    }
                    ::core::option::Option::Some(::core::result::Result::Err(e)) => {
                        ::core::result::Result::Err(__malformed(__start, row.specs(), e))
                    }
                    ::core::option::Option::None => #construct,
                }
            };
        }
        let vars: Vec<_> = (0..active.len()).map(|i| format_ident!("__f{}", i)).collect();
        let decls = active.iter().zip(&vars).map(|(f, var)| {
            let ty = self.frame_ty(f);
            quote!(let mut #var: ::core::option::Option<#ty> = ::core::option::Option::None;)
        });
        let arms = active.iter().zip(&vars).map(|(f, var)| {
            let name = lit(&f.name);
            let value = self.value_trait(f);
            quote! {
                #name => {
                    #var = ::core::option::Option::Some(
                        #value::deserialize(&col.spec.typ, col.value).map_err(|e| __column(&col, e))?,
                    );
                }
            }
        });
        let takes = active.iter().zip(&vars).map(|(f, var)| {
            let name = lit(&f.name);
            quote! {
                let ::core::option::Option::Some(#var) = #var else {
                    let e = __missing(::core::any::type_name::<Self>(), #name, __specs);
                    return ::core::result::Result::Err(#de::DeserializeError::TypeCheck(e));
                };
            }
        });
        quote! {
            let __specs = row.specs();
            let __start = __specs.len() - row.columns_remaining();
            #(#decls)*
            for (__i, col) in row.enumerate() {
                let col = match col {
                    ::core::result::Result::Ok(col) => col,
                    ::core::result::Result::Err(e) => {
                        return ::core::result::Result::Err(__malformed(__start + __i, __specs, e));
                    }
                };
                match col.spec.name.as_str() {
                    #(#arms)*
                    _ => {
                        let e = __extra(::core::any::type_name::<Self>(), col.spec);
                        return ::core::result::Result::Err(__column(&col, #de::DeserializeError::TypeCheck(e)));
                    }
                }
            }
            #(#takes)*
            #construct
        }
    }

    fn type_check_in_order(&self) -> TokenStream {
        let active = self.active();
        let specs: Vec<_> = (0..active.len()).map(|i| format_ident!("__spec{}", i)).collect();
        let checks = active.iter().zip(&specs).map(|(f, spec)| {
            let value = self.value_trait(f);
            quote!(#value::type_check(&#spec.typ).map_err(|e| __in_column(e, #spec))?;)
        });
        quote! {
            let [#(#specs),*] = specs else {
                return ::core::result::Result::Err(__count(::core::any::type_name::<Self>(), specs));
            };
            #(#checks)*
            ::core::result::Result::Ok(())
        }
    }

    fn deserialize_in_order(&self) -> TokenStream {
        let de = &self.de;
        let active = self.active();
        let n = active.len();
        let construct = self.construct();
        let count = quote! {
            #de::DeserializeError::ColumnCount { expected: #n, actual: __actual }
        };
        if active.is_empty() {
            return quote! {
                let __actual = row.columns_remaining();
                if __actual != 0 {
                    return ::core::result::Result::Err(#count);
                }
                #construct
            };
        }
        let reads = active.iter().enumerate().map(|(i, f)| {
            let var = format_ident!("__f{}", i);
            let value = self.value_trait(f);
            quote! {
                let #var = match row.next() {
                    ::core::option::Option::Some(::core::result::Result::Ok(col)) => {
                        #value::deserialize(&col.spec.typ, col.value).map_err(|e| __column(&col, e))?
                    }
                    ::core::option::Option::Some(::core::result::Result::Err(e)) => {
                        return ::core::result::Result::Err(__malformed(__start + #i, __specs, e));
                    }
                    ::core::option::Option::None => return ::core::result::Result::Err(#count),
                };
            }
        });
        quote! {
            let mut row = row;
            let __actual = row.columns_remaining();
            if __actual != #n {
                return ::core::result::Result::Err(#count);
            }
            let __specs = row.specs();
            let __start = __specs.len() - __actual;
            #(#reads)*
            #construct
        }
    }
}
